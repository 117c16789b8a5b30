// Entry point of the self-containment test: the work is done by the compiler.
int main()
{
    return 0;
}
