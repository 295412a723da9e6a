/* tl_fixture: what the unit tests over the hand-made timelines of
 * tests/fixtures/timelines-diagnose/ share: loading one (a failed load fails
 * the test with the loader's message) and a finding's evidence by key. Run
 * from the top of the tree (make unit). Include after <cmocka.h>. */
#ifndef TTS_TEST_TL_FIXTURE_H
#define TTS_TEST_TL_FIXTURE_H

#include <stdio.h>

#include "timeline.h"
#include "timeline_internal.h"

#define FIXTURES "tests/fixtures/timelines-diagnose/"

/* FIXTURES/name.json, loaded as `diagnose` would load it. */
static inline struct timeline *fixture_load(const char *name)
{
	char path[256], err[512];
	struct timeline *tl;

	snprintf(path, sizeof(path), FIXTURES "%s.json", name);
	tl = timeline_load(path, err, sizeof(err));
	if (!tl)
		fail_msg("%s", err);
	return tl;
}

/* A finding's evidence[k]; the test fails when it has none. */
static inline json_t *fixture_evidence(json_t *f, const char *k)
{
	json_t *v = json_object_get(json_object_get(f, "evidence"), k);

	if (!v)
		fail_msg("evidence has no %s", k);
	return v;
}

#endif
