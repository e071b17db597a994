/*
 * test_warmsize.c - the sizing of the adaptive warm pools (warmsize.c): a
 * burst's misses grow a pool's target up to its ceiling, idle intervals
 * shrink it one at a time down to its floor, a take keeps it, and the
 * memory budget caps the sum of all pools, the first pools first.
 */
#include "config.h"

#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "warmsize.h"

#define IDLE 1000 /* ms */
#define MiB (1024ULL * 1024ULL)

static void test_starts_at_the_floor(void **state)
{
    struct nb_warmsize w;
    (void)state;
    nb_warmsize_init(&w, 2, 8, 5, 100);
    assert_int_equal(w.target, 2);
    /* misses before the start are not demand it saw */
    assert_int_equal(nb_warmsize_step(&w, 5, 0, 2, IDLE, 200), 2);
    /* a ceiling below the floor is the floor */
    nb_warmsize_init(&w, 3, 1, 0, 0);
    assert_int_equal(w.ceiling, 3);
    assert_int_equal(nb_warmsize_step(&w, 10, 0, 0, IDLE, 10), 3);
}

static void test_a_restarted_reaper_resumes_within_the_bounds(void **state)
{
    struct nb_warmsize w;
    (void)state;
    nb_warmsize_init(&w, 2, 8, 0, 100);
    nb_warmsize_resume(&w, 6);
    assert_int_equal(w.target, 6);
    /* and shrinks from there once idle, as it would have */
    assert_int_equal(nb_warmsize_step(&w, 0, 0, 6, IDLE, 100 + IDLE), 5);
    nb_warmsize_resume(&w, 50); /* taught under a higher ceiling */
    assert_int_equal(w.target, 8);
    nb_warmsize_resume(&w, 0); /* under a higher floor */
    assert_int_equal(w.target, 2);
}

static void test_a_burst_grows_it_by_what_it_missed(void **state)
{
    struct nb_warmsize w;
    (void)state;
    nb_warmsize_init(&w, 2, 8, 0, 0);
    /* a burst of 6: 2 hits, 4 misses */
    assert_int_equal(nb_warmsize_step(&w, 4, 50, 0, IDLE, 100), 6);
    /* no more misses: it stays while the pool fills */
    assert_int_equal(nb_warmsize_step(&w, 4, 50, 3, IDLE, 200), 6);
    /* a bigger burst: up to the ceiling, no further */
    assert_int_equal(nb_warmsize_step(&w, 40, 300, 0, IDLE, 300), 8);
    assert_int_equal(nb_warmsize_step(&w, 41, 400, 0, IDLE, 400), 8);
}

static void test_idle_shrinks_one_per_interval_to_the_floor(void **state)
{
    struct nb_warmsize w;
    int64_t t = 0;
    (void)state;
    nb_warmsize_init(&w, 1, 8, 0, 0);
    assert_int_equal(nb_warmsize_step(&w, 3, 10, 0, IDLE, 10), 4);
    /* not yet an idle interval since the growth */
    assert_int_equal(nb_warmsize_step(&w, 3, 10, 4, IDLE, 10 + IDLE - 1), 4);
    t = 10 + IDLE;
    assert_int_equal(nb_warmsize_step(&w, 3, 10, 4, IDLE, t), 3);
    /* the next interval counts from the shrink */
    assert_int_equal(nb_warmsize_step(&w, 3, 10, 3, IDLE, t + IDLE / 2), 3);
    assert_int_equal(nb_warmsize_step(&w, 3, 10, 3, IDLE, t + IDLE), 2);
    assert_int_equal(nb_warmsize_step(&w, 3, 10, 2, IDLE, t + 2 * IDLE), 1);
    /* never below the floor */
    assert_int_equal(nb_warmsize_step(&w, 3, 10, 1, IDLE, t + 10 * IDLE), 1);
}

static void test_takes_keep_it_and_an_empty_pool_does_not_shrink(void **state)
{
    struct nb_warmsize w;
    (void)state;
    nb_warmsize_init(&w, 0, 8, 0, 0);
    assert_int_equal(nb_warmsize_step(&w, 5, 100, 0, IDLE, 100), 5);
    /* a hit within every interval: it stays */
    for (int64_t t = 900; t < 5000; t += 900)
        assert_int_equal(nb_warmsize_step(&w, 5, t, 5, IDLE, t), 5);
    /* nothing ready (Docker cannot start them): nothing sits unused, it stays */
    assert_int_equal(nb_warmsize_step(&w, 5, 4500, 0, IDLE, 20000), 5);
    /* ready and unused: down */
    assert_int_equal(nb_warmsize_step(&w, 5, 4500, 5, IDLE, 20001), 4);
}

static void test_a_counter_that_went_back_starts_over(void **state)
{
    struct nb_warmsize w;
    (void)state;
    nb_warmsize_init(&w, 0, 8, 10, 0);
    assert_int_equal(nb_warmsize_step(&w, 0, 0, 0, IDLE, 10), 0);
    assert_int_equal(nb_warmsize_step(&w, 2, 20, 0, IDLE, 20), 2);
}

static void test_the_memory_cap(void **state)
{
    (void)state;
    /* nothing caps it */
    assert_int_equal(nb_warmsize_cap(0, UINT64_MAX, 0, 0, 256 * MiB), UINT_MAX);
    /* a budget of 600 MiB holds two of 256 */
    assert_int_equal(nb_warmsize_cap(600 * MiB, UINT64_MAX, 0, 5, 256 * MiB), 2);
    /* the host: those ready plus what fits above the reserve */
    assert_int_equal(nb_warmsize_cap(0, 1024 * MiB, 512 * MiB, 3, 256 * MiB), 5);
    assert_int_equal(nb_warmsize_cap(0, 100 * MiB, 512 * MiB, 3, 256 * MiB), 3);
    /* the smaller of both */
    assert_int_equal(nb_warmsize_cap(256 * MiB, 8192 * MiB, 512 * MiB, 0, 256 * MiB), 1);
}

static void test_fit_serves_the_first_pools_first(void **state)
{
    unsigned want[4] = {2, 3, 4, 1};
    (void)state;
    nb_warmsize_fit(want, 4, 6);
    assert_int_equal(want[0], 2);
    assert_int_equal(want[1], 3);
    assert_int_equal(want[2], 1);
    assert_int_equal(want[3], 0);
    nb_warmsize_fit(want, 4, UINT_MAX);
    assert_int_equal(want[2], 1);
    nb_warmsize_fit(want, 4, 0);
    assert_int_equal(want[0] + want[1] + want[2] + want[3], 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_starts_at_the_floor),
        cmocka_unit_test(test_a_restarted_reaper_resumes_within_the_bounds),
        cmocka_unit_test(test_a_burst_grows_it_by_what_it_missed),
        cmocka_unit_test(test_idle_shrinks_one_per_interval_to_the_floor),
        cmocka_unit_test(test_takes_keep_it_and_an_empty_pool_does_not_shrink),
        cmocka_unit_test(test_a_counter_that_went_back_starts_over),
        cmocka_unit_test(test_the_memory_cap),
        cmocka_unit_test(test_fit_serves_the_first_pools_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
