/* report.c — the benchmarks' table, notes and machine description (see report.h). */
#include "report.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* ---- JSON ---- */

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f); /* UTF-8 passes through */
	}
	fputc('"', f);
}

/* A figure cell: its text, and when it starts with a number (after a sign or '~'), the number, the
 * unit that follows it ("M/s", "µs", "×", "%", "ms", ...) and a second number in brackets (a p99). */
static void json_figure(FILE *f, const char *cell)
{
	fputs("{\"text\":", f);
	json_str(f, cell);
	const char *p = cell;
	while (*p == ' ' || *p == '~' || *p == '<' || *p == '>' || *p == '=')
		p++;
	char *end;
	double v = strtod(p, &end);
	if (end != p) {
		fprintf(f, ",\"value\":%.9g", v);
		while (*end == ' ')
			end++;
		char unit[32];
		size_t n = 0;
		while (end[n] && end[n] != ' ' && end[n] != '[' && end[n] != '(' && n + 1 < sizeof unit) {
			unit[n] = end[n];
			n++;
		}
		unit[n] = 0;
		fputs(",\"unit\":", f);
		json_str(f, unit);
		const char *b = strchr(end, '[');
		if (b) {
			double w = strtod(b + 1, &end);
			if (end != b + 1)
				fprintf(f, ",\"bracket\":%.9g", w);
		}
	}
	fputc('}', f);
}

bool table_write_json(const char *path, const char *benchmark, int workers, const char *settings)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "%s: cannot write %s\n", benchmark, path);
		return false;
	}
	char model[256], date[64];
	cpu_model(model, sizeof model);
	time_t now = time(NULL);
	strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	fputs("{\"benchmark\":", f);
	json_str(f, benchmark);
	fputs(",\"date\":", f);
	json_str(f, date);
	fputs(",\"machine\":{\"cpu\":", f);
	json_str(f, model);
	fprintf(f, ",\"online_cpus\":%ld,\"memory_mib\":%ld,\"compiler\":", sysconf(_SC_NPROCESSORS_ONLN),
		pages > 0 && psz > 0 ? (long)((double)pages * (double)psz / 1048576.0) : -1L);
	json_str(f, "gcc " __VERSION__);
	fprintf(f, "},\"workers\":%d,\"settings\":", workers);
	json_str(f, settings ? settings : "");
	fputs(",\"rows\":[", f);
	for (int r = 0; r < n_rows; r++) {
		fputs(r ? ",\n {" : "\n {", f);
		fputs("\"measurement\":", f);
		json_str(f, table[r][0]);
		fputs(",\"ours\":", f);
		json_figure(f, table[r][1]);
		fputs(",\"peer\":", f);
		json_str(f, table[r][2]);
		fputs(",\"peer_figure\":", f);
		json_figure(f, table[r][3]);
		fputs(",\"ratio\":", f);
		json_figure(f, table[r][4]);
		fputs(",\"target\":", f);
		json_str(f, table[r][5]);
		fputs(",\"met\":", f);
		json_str(f, !strcmp(table[r][6], "**NO**") ? "no" : table[r][6]);
		fputc('}', f);
	}
	fputs("\n],\"notes\":[", f);
	for (int i = 0; i < n_notes; i++) {
		fputs(i ? ",\n " : "\n ", f);
		json_str(f, notes[i]);
	}
	fputs("\n]}\n", f);
	bool ok = !ferror(f);
	ok = fclose(f) == 0 && ok;
	if (!ok)
		fprintf(stderr, "%s: error writing %s\n", benchmark, path);
	return ok;
}
