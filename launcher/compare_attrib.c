/* compare_attrib: the two attributions paired by kind and by cause; see
 * compare_attrib.h. */
#include "compare_attrib.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double cattr_share(const struct cattr *c, int s, double ms)
{
	if (!c->has[s] || !(c->window[s] > 0) || !isfinite(ms))
		return NAN;
	return 100.0 * ms / c->window[s];
}

static double larger(const struct cattr_row *r)
{
	double b = isfinite(r->b) ? r->b : 0, a = isfinite(r->a) ? r->a : 0;

	return b > a ? b : a;
}

static int row_cmp(const void *x, const void *y)
{
	const struct cattr_row *p = x, *q = y;
	double a = larger(p), b = larger(q);

	if (a != b)
		return a > b ? -1 : 1;
	if (p->kind != q->kind)
		return p->kind < q->kind ? -1 : 1;
	return strcmp(p->what ? p->what : "", q->what ? q->what : "");
}

/* the row of (kind, what) in rows[0..*n), added (both sides 0) if new: at
 * most 2 x ATTR_MAX_CAUSES-ish rows, a scan is enough */
static struct cattr_row *row_of(struct cattr_row *rows, size_t *n, enum attr_kind k,
				const char *what)
{
	for (size_t i = 0; i < *n; i++)
		if (rows[i].kind == k &&
		    (what ? rows[i].what && !strcmp(rows[i].what, what) : !rows[i].what))
			return &rows[i];
	rows[*n] = (struct cattr_row){k, what, 0, 0};
	return &rows[(*n)++];
}

int cattr_build(struct cattr *c, const struct timeline *before, const struct timeline *after)
{
	const struct timeline *tl[2] = {before, after};
	size_t cap = 0;

	memset(c, 0, sizeof(*c));
	for (int s = 0; s < 2; s++) {
		c->has[s] = tl[s] && attr_view_decode(tl[s], &c->v[s]);
		c->window[s] = c->has[s] ? (double)c->v[s].r.window_us / 1000 : NAN;
		c->explained[s] = c->has[s] ? (double)c->v[s].r.explained_us / 1000 : NAN;
		cap += c->has[s] ? c->v[s].r.n_causes : 0;
	}
	c->causes = calloc(cap + 1, sizeof(*c->causes));
	c->kinds = calloc(AK_N, sizeof(*c->kinds));
	if (!c->causes || !c->kinds) {
		cattr_free(c);
		return -1;
	}
	for (int s = 0; s < 2; s++) {
		for (size_t i = 0; c->has[s] && i < c->v[s].r.n_causes; i++) {
			const struct attr_cause *k = &c->v[s].r.causes[i];
			struct cattr_row *r = row_of(c->causes, &c->n_causes, k->kind, k->what);
			struct cattr_row *t = row_of(c->kinds, &c->n_kinds, k->kind, NULL);

			*(s ? &r->a : &r->b) += (double)k->us / 1000;
			*(s ? &t->a : &t->b) += (double)k->us / 1000;
		}
	}
	/* a side without the section has no figure at all */
	for (int s = 0; s < 2; s++) {
		if (c->has[s])
			continue;
		for (size_t i = 0; i < c->n_causes; i++)
			*(s ? &c->causes[i].a : &c->causes[i].b) = NAN;
		for (size_t i = 0; i < c->n_kinds; i++)
			*(s ? &c->kinds[i].a : &c->kinds[i].b) = NAN;
	}
	qsort(c->causes, c->n_causes, sizeof(*c->causes), row_cmp);
	qsort(c->kinds, c->n_kinds, sizeof(*c->kinds), row_cmp);
	return 0;
}

void cattr_free(struct cattr *c)
{
	free(c->causes);
	free(c->kinds);
	for (int s = 0; s < 2; s++)
		if (c->has[s])
			attr_view_free(&c->v[s]);
	memset(c, 0, sizeof(*c));
}
