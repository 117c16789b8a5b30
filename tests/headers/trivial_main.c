/* Entry point of the self-containment test: the work is done by the compiler. */
int main(void)
{
    return 0;
}
