/*
 * csv_fields.c
 *	  Typing the fields of a CSV file: inference and strict parsing (see
 *	  csv_fields.h).
 */
#include "csv_fields.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

bool
csv_type_by_name(const char *name, CsvType *t)
{
	if (strcmp(name, "int") == 0)
		*t = CSV_INT;
	else if (strcmp(name, "float") == 0)
		*t = CSV_FLOAT;
	else if (strcmp(name, "string") == 0)
		*t = CSV_STRING;
	else if (strcmp(name, "bool") == 0)
		*t = CSV_BOOL;
	else
		return false;
	return true;
}

const char *
csv_type_name(CsvType t)
{
	return t == CSV_INT ? "int" : t == CSV_FLOAT ? "float" : t == CSV_BOOL ? "bool" : "string";
}

const char *
csv_type_noun(CsvType t)
{
	return t == CSV_INT ? "an integer" : t == CSV_FLOAT ? "a number" :
		t == CSV_BOOL ? "a boolean (true/false, t/f, yes/no, on/off, 1/0)" : "a string";
}

bool
csv_leading_zero(const char *s)
{
	if (*s == '+' || *s == '-')
		s++;
	return s[0] == '0' && isdigit((unsigned char) s[1]);
}

bool
csv_int_literal(const char *s)
{
	const char *p = s;

	if (*p == '+' || *p == '-')
		p++;
	if (!isdigit((unsigned char) *p))
		return false;
	for (; *p; p++)
		if (!isdigit((unsigned char) *p))
			return false;
	return true;
}

/* [+-]digits, at most 19 digits and within int64 */
bool
csv_parse_int(const char *s, int64_t *v)
{
	char	   *end;
	long long	x;

	if (!csv_int_literal(s))
		return false;
	errno = 0;
	x = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return false;
	*v = x;
	return true;
}

/* NaN, [+-]Infinity, [+-]inf in any case: the spellings PostgreSQL's float8 takes everywhere */
static bool
float_special(const char *s, double *v)
{
	const char *p = s + (*s == '+' || *s == '-');

	if (strcasecmp(s, "nan") == 0)
		*v = NAN;
	else if (strcasecmp(p, "infinity") == 0 || strcasecmp(p, "inf") == 0)
		*v = *s == '-' ? -INFINITY : INFINITY;
	else
		return false;
	return true;
}

/* [+-](digits[.digits] | .digits)[(e|E)[+-]digits] */
static bool
float_decimal(const char *s)
{
	const char *p = s;
	int			digits = 0;

	if (*p == '+' || *p == '-')
		p++;
	for (; isdigit((unsigned char) *p); p++)
		digits++;
	if (*p == '.')
		for (p++; isdigit((unsigned char) *p); p++)
			digits++;
	if (digits == 0)
		return false;
	if (*p == 'e' || *p == 'E')
	{
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!isdigit((unsigned char) *p))
			return false;
		while (isdigit((unsigned char) *p))
			p++;
	}
	return *p == '\0';
}

bool
csv_float_literal(const char *s)
{
	double		v;

	return float_decimal(s) || float_special(s, &v);
}

/* a decimal (finite) or a special value */
bool
csv_parse_float(const char *s, double *v)
{
	char	   *end;

	if (float_special(s, v))
		return true;
	if (!float_decimal(s))
		return false;
	errno = 0;
	*v = strtod(s, &end);
	return *end == '\0' && isfinite(*v) && !(errno == ERANGE && *v != 0);
}

bool
csv_parse_bool(const char *s, bool *v)
{
	static const char *const yes[] = {"true", "t", "yes", "y", "on", "1", NULL};
	static const char *const no[] = {"false", "f", "no", "n", "off", "0", NULL};

	for (int i = 0; yes[i]; i++)
		if (strcasecmp(s, yes[i]) == 0)
		{
			*v = true;
			return true;
		}
	for (int i = 0; no[i]; i++)
		if (strcasecmp(s, no[i]) == 0)
		{
			*v = false;
			return true;
		}
	return false;
}

int
csv_bom_length(const char *s)
{
	return (unsigned char) s[0] == 0xEF && (unsigned char) s[1] == 0xBB && (unsigned char) s[2] == 0xBF ? 3 : 0;
}

void
csv_infer_init(CsvInfer *in)
{
	in->any = false;
	in->all_bool = in->all_int = in->all_float = true;
}

void
csv_infer_add(CsvInfer *in, const char *value)
{
	bool		zero = csv_leading_zero(value);

	in->any = true;
	/* inferred booleans are the words only: 1/0 make an integer column */
	in->all_bool = in->all_bool && (strcasecmp(value, "true") == 0 || strcasecmp(value, "false") == 0);
	/* an integer beyond 64 bits keeps the column int: parsing it is then an error naming it */
	in->all_int = in->all_int && !zero && csv_int_literal(value);
	/* so does a decimal beyond a double's range ("1e999") keep it float */
	in->all_float = in->all_float && !zero && csv_float_literal(value);
}

CsvType
csv_infer_result(const CsvInfer *in)
{
	if (!in->any)
		return CSV_STRING;
	if (in->all_bool)
		return CSV_BOOL;
	if (in->all_int)
		return CSV_INT;
	if (in->all_float)
		return CSV_FLOAT;
	return CSV_STRING;
}
