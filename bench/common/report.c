/* report.c — the benchmarks' table, notes and machine description (see report.h). */
#include "report.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { COLS = 7, MAX_ROWS = 64, CELL = 160, MAX_NOTES = 48, FMT_RING = 256 };
static const char *header[COLS] = { "Measurement", "Ours", "Peer (same run)", "Peer", "Ratio", "Target", "Met" };
static char table[MAX_ROWS][COLS][CELL];
static int n_rows;
static char notes[MAX_NOTES][400];
static int n_notes;

void table_set_peer_header(const char *h)
{
	header[2] = h;
}

void table_row(const char *measure, const char *ours, const char *peer, const char *peer_fig, const char *ratio,
	       const char *target, const char *metc)
{
	if (n_rows >= MAX_ROWS)
		return;
	const char *c[COLS] = { measure, ours, peer, peer_fig, ratio, target, metc };
	for (int i = 0; i < COLS; i++)
		snprintf(table[n_rows][i], CELL, "%s", c[i] ? c[i] : "");
	n_rows++;
}

/* Display width of a UTF-8 string (counts code points; the tables use × ≤ ≥ µ —). */
static int width(const char *s)
{
	int w = 0;
	for (; *s; s++)
		if (((unsigned char)*s & 0xC0) != 0x80)
			w++;
	return w;
}

void table_print(bool markdown)
{
	int wd[COLS];
	for (int c = 0; c < COLS; c++) {
		wd[c] = width(header[c]);
		for (int r = 0; r < n_rows; r++)
			if (width(table[r][c]) > wd[c])
				wd[c] = width(table[r][c]);
	}
	const char *sep = markdown ? " | " : "  ";
	for (int r = -1; r < n_rows; r++) {
		if (markdown)
			fputs("| ", stdout);
		for (int c = 0; c < COLS; c++) {
			const char *s = r < 0 ? header[c] : table[r][c];
			bool right = c == 1 || c == 3; /* figures */
			int pad = wd[c] - width(s);
			if (right)
				printf("%*s%s", pad, "", s);
			else
				printf("%s%*s", s, pad, "");
			fputs(c + 1 < COLS ? sep : (markdown ? " |\n" : "\n"), stdout);
		}
		if (r < 0) {
			if (markdown)
				fputs("|", stdout);
			for (int c = 0; c < COLS; c++) {
				bool right = c == 1 || c == 3;
				if (markdown) {
					putchar(right ? '-' : ':');
					for (int i = 0; i < wd[c]; i++)
						putchar('-');
					putchar(right ? ':' : '-');
					putchar('|');
				} else {
					for (int i = 0; i < wd[c]; i++)
						putchar('-');
					fputs(c + 1 < COLS ? sep : "", stdout);
				}
			}
			putchar('\n');
		}
	}
}

const char *fmt(const char *f, ...)
{
	static char bufs[FMT_RING][CELL]; /* enough for every cell of a few rows in flight */
	static int next;
	char *b = bufs[next++ % FMT_RING];
	va_list ap;
	va_start(ap, f);
	vsnprintf(b, CELL, f, ap);
	va_end(ap);
	return b;
}

const char *met(bool known, bool ok)
{
	return !known ? "n/a" : ok ? "yes" : "**NO**";
}

void note(const char *f, ...)
{
	if (n_notes >= MAX_NOTES)
		return;
	va_list ap;
	va_start(ap, f);
	vsnprintf(notes[n_notes++], sizeof notes[0], f, ap);
	va_end(ap);
}

void notes_print(void)
{
	if (n_notes)
		putchar('\n');
	for (int i = 0; i < n_notes; i++)
		printf("- %s\n", notes[i]);
}

void cpu_model(char *buf, size_t size)
{
	snprintf(buf, size, "unknown");
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (!f)
		return;
	char line[512];
	while (fgets(line, sizeof line, f)) {
		if (!strncmp(line, "model name", 10)) {
			char *p = strchr(line, ':');
			if (p) {
				p++;
				while (*p == ' ' || *p == '\t')
					p++;
				p[strcspn(p, "\n")] = '\0';
				snprintf(buf, size, "%s", p);
			}
			break;
		}
	}
	fclose(f);
}
