/*
 * bench/sub_proc.h: the process plumbing of bench/sub_baselines.c
 * (bench/sub_proc.c): a deadline for the whole run, failing, pipes between
 * the driver and its children, and CPU time of this process and of others
 * (/proc).
 */
#ifndef SUB_PROC_H
#define SUB_PROC_H

#include <stddef.h>
#include <stdint.h>

/* monotonic ns after which everything gives up (main sets it: SUB_MAX_SECONDS) */
extern int64_t deadline_ns;

int64_t now_ns(void);
/* this process's user + system CPU time */
int64_t cpu_self_ns(void);
/* print "sub_baselines[pid]: " and the message to stderr, exit 1 */
void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* ms to wait in one poll: at most 1000, 0 once the deadline has passed */
int remaining_ms(void);
/* write all of buf, or fail (at the deadline too) */
void write_all(int fd, const void *buf, size_t len);
/* read exactly len bytes before the deadline: 0, or -1 (end of file, timeout) */
int read_full(int fd, void *buf, size_t len);
/* wait for the parent's word (a byte, or its end) */
void hold(int go);

/* a process's CPU time in ns (its threads' schedstat run time); -1 when it is gone */
int64_t proc_cpu_ns(int pid);
int proc_ppid(int pid);

#define MAX_PROCS 4096
struct procset {
	int n;
	int pid[MAX_PROCS];
	int64_t cpu[MAX_PROCS];
};

/* CPU times of the postmaster and its children */
void cluster_snapshot(struct procset *s, int postmaster);
/* CPU spent between two snapshots by the processes of the second */
int64_t cluster_delta(const struct procset *a, const struct procset *b);

#endif
