/*
 * main.c
 *	  Runs every unit test listed in tests.list, or those named on the
 *	  command line, and prints TAP with a closing summary line.  Another
 *	  suite (the trail tests) builds this runner with its own list:
 *	  -DUNIT_TESTS_LIST='"../trail/tests/tests.list"'.
 */
#include "unit.h"

#include <stdarg.h>
#include <string.h>

int			unit_failures;

void
unit_fail(const char *file, int line, const char *fmt, ...)
{
	va_list		ap;

	/* cap the noise of one broken loop */
	if (unit_failures++ >= 10)
		return;
	printf("#   %s:%d: ", file, line);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

typedef struct UnitCase
{
	const char *name;
	void		(*fn) (void);
} UnitCase;

static const UnitCase cases[] = {
#define X(name) {#name, name},
#include UNIT_TESTS_LIST
#undef X
};

static int
wanted(const char *name, int argc, char **argv)
{
	if (argc <= 1)
		return 1;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return 1;
	return 0;
}

int
main(int argc, char **argv)
{
	int			ncases = (int) (sizeof(cases) / sizeof(cases[0]));
	int			planned = 0;
	int			passed = 0;
	int			failed = 0;
	int			n = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < ncases; i++)
		planned += wanted(cases[i].name, argc, argv);
	printf("1..%d\n", planned);

	for (int i = 0; i < ncases; i++)
	{
		if (!wanted(cases[i].name, argc, argv))
			continue;
		unit_failures = 0;
		cases[i].fn();
		n++;
		if (unit_failures == 0)
		{
			passed++;
			printf("ok %d - %s\n", n, cases[i].name);
		}
		else
		{
			failed++;
			printf("not ok %d - %s (%d failed checks)\n", n, cases[i].name, unit_failures);
		}
	}
	if (planned == 0)
		fprintf(stderr, "no unit test matches the names given\n");
	printf("%d passed, %d failed\n", passed, failed);
	return (failed == 0 && planned > 0) ? 0 : 1;
}
