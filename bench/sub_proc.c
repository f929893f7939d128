/*
 * bench/sub_proc.c: the process plumbing of the subscription baselines
 * (bench/sub_proc.h): a deadline, failing, pipes between the driver and its
 * children, and CPU time of this process and of others, from /proc.
 */
#include "sub_proc.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

int64_t deadline_ns;

int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t cpu_self_ns(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000 +
	       ((int64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
}

void fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "sub_baselines[%d]: ", (int)getpid());
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

int remaining_ms(void)
{
	int64_t left = deadline_ns - now_ns();

	if (left <= 0)
		return 0;
	return left > 1000000000 ? 1000 : (int)(left / 1000000) + 1;
}

void write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t w = write(fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			struct pollfd pfd = {.fd = fd, .events = POLLOUT};

			if (now_ns() > deadline_ns)
				fail("write: deadline");
			poll(&pfd, 1, remaining_ms());
			continue;
		}
		if (w <= 0)
			fail("write: %s", strerror(errno));
		p += w;
		len -= (size_t)w;
	}
}

/* read exactly len bytes before the deadline: 0, or -1 (end of file, timeout) */
int read_full(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len > 0) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		ssize_t r;

		if (now_ns() > deadline_ns)
			return -1;
		if (poll(&pfd, 1, remaining_ms()) <= 0)
			continue;
		r = read(fd, p, len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		len -= (size_t)r;
	}
	return 0;
}

/* wait for the parent's word (a byte, or its end) */
void hold(int go)
{
	char b;

	(void)read_full(go, &b, 1);
}

/* ---- CPU of other processes, from /proc ---- */

/* a process's CPU time in ns: the sum of its threads' schedstat run time;
 * -1 when it is gone */
int64_t proc_cpu_ns(int pid)
{
	char path[64];
	DIR *d;
	struct dirent *de;
	int64_t sum = 0;
	int found = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((de = readdir(d)) != NULL) {
		char p2[300];
		unsigned long long run;
		FILE *f;

		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(p2, sizeof(p2), "/proc/%d/task/%s/schedstat", pid, de->d_name);
		f = fopen(p2, "r");
		if (!f)
			continue;
		if (fscanf(f, "%llu", &run) == 1) {
			sum += (int64_t)run;
			found = 1;
		}
		fclose(f);
	}
	closedir(d);
	return found ? sum : -1;
}

int proc_ppid(int pid)
{
	char path[64], buf[1024], *p;
	FILE *f;
	size_t n;
	int ppid = -1;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	if (p && sscanf(p + 1, " %*c %d", &ppid) != 1)
		ppid = -1;
	return ppid;
}

/* the postmaster and its children */
void cluster_snapshot(struct procset *s, int postmaster)
{
	DIR *d = opendir("/proc");
	struct dirent *de;

	s->n = 0;
	if (!d)
		fail("/proc: %s", strerror(errno));
	while ((de = readdir(d)) != NULL && s->n < MAX_PROCS) {
		int pid = atoi(de->d_name);
		int64_t cpu;

		if (pid <= 0 || (pid != postmaster && proc_ppid(pid) != postmaster))
			continue;
		cpu = proc_cpu_ns(pid);
		if (cpu < 0)
			continue;
		s->pid[s->n] = pid;
		s->cpu[s->n++] = cpu;
	}
	closedir(d);
}

int64_t cluster_delta(const struct procset *a, const struct procset *b)
{
	int64_t sum = 0;

	for (int i = 0; i < b->n; i++) {
		int64_t before = 0;

		for (int j = 0; j < a->n; j++)
			if (a->pid[j] == b->pid[i])
				before = a->cpu[j];
		if (b->cpu[i] > before)
			sum += b->cpu[i] - before;
	}
	return sum;
}
