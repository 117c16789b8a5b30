/*
 * peer_lace.c — the Lace peer: runs bench/peers/lace_fib.c's driver (built against a Lace source
 * tree outside this repository by bench/peers/lace.sh) as a child process, one repetition per
 * call, so that its repetitions interleave with ours in the same run. A child process because
 * Lace's idle workers busy-wait: inside our process they would take the cores from our pool.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

static char driver[4096];
static char version[64] = "Lace ?";

void lace_set_driver(const char *path)
{
	driver[0] = '\0';
	if (!path || !*path || access(path, X_OK) != 0)
		return;
	snprintf(driver, sizeof driver, "%s", path);
	/* lace.sh writes the version beside the driver */
	char vpath[4200];
	const char *slash = strrchr(driver, '/');
	int dir = slash ? (int)(slash - driver) : 1;
	snprintf(vpath, sizeof vpath, "%.*s/VERSION", dir, slash ? driver : ".");
	FILE *f = fopen(vpath, "r");
	if (f) {
		char v[32] = "";
		if (fgets(v, sizeof v, f)) {
			v[strcspn(v, "\n")] = '\0';
			snprintf(version, sizeof version, "Lace %s", v);
		}
		fclose(f);
	}
}

bool lace_available(void)
{
	return driver[0] != '\0';
}

const char *lace_version(void)
{
	return version;
}

uint64_t lace_fib_ns(int workers, int n, long *result)
{
	if (!lace_available())
		return 0;
	char cmd[4400];
	/* the path comes from the user's own option or environment; quote it for the shell */
	snprintf(cmd, sizeof cmd, "'%s' -w %d -n %d -r 1", driver, workers, n);
	fflush(stdout);
	FILE *p = popen(cmd, "r");
	if (!p)
		return 0;
	unsigned long long ns = 0;
	long r = -1;
	int got = fscanf(p, "%llu %ld", &ns, &r);
	int rc = pclose(p);
	if (got != 2 || rc != 0)
		return 0;
	*result = r;
	return (uint64_t)ns;
}
