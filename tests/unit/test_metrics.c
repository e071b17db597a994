/*
 * test_metrics.c - the shared counters of GET /metrics (metrics.c): the
 * histogram's buckets, sum and count, exact totals when many processes
 * add at once to the one shared block, the error table (its pairs, its
 * overflow, the duplicates a race may claim), which Docker call a path
 * is, the exposition text; and the cgroup reader (cgstat.c) on fake v1
 * and v2 trees.
 *
 * Forked children never call cmocka assertions: they report through their
 * exit status, which the parent asserts.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"
#include "cgstat.h"
#include "history.h"
#include "metrics.h"
#include "ratelimit.h"

#define CHILDREN 8
#define ITERATIONS 20000

static int setup(void **state)
{
    char err[128];
    (void)state;
    return nb_metrics_map(err, sizeof(err));
}

static int teardown(void **state)
{
    (void)state;
    nb_metrics_unmap();
    return 0;
}

static char *render(void)
{
    struct nb_buf b;
    nb_buf_init(&b, 1 << 20);
    nb_metrics_render(&b, nb_metrics);
    return nb_buf_steal(&b);
}

/* The text has this exact line. */
static int has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
        if ((p == text || p[-1] == '\n') && p[n] == '\n')
            return 1;
    return 0;
}

static void test_nothing_is_recorded_before_the_block_is_mapped(void **state)
{
    (void)state;
    nb_metrics_unmap();
    /* every recorder is a no-op without a block: none may crash */
    nb_metrics_route(NB_MR_EXEC, 5);
    nb_metrics_docker(NB_MDK_PING, 5, NB_MDE_TIMEOUT);
    nb_metrics_create(NB_MC_COLD);
    nb_metrics_destroy(NB_MD_API);
    nb_metrics_warm(1);
    nb_metrics_error(404, "not_found");
    nb_metrics_workers(3, 1);
    assert_null(nb_metrics);
}

static void test_histogram_buckets_sum_and_count(void **state)
{
    struct nb_hist *h = &nb_metrics->route[NB_MR_EXEC];
    char *text;
    (void)state;
    nb_metrics_route(NB_MR_EXEC, 1000);      /* exactly on the 1 ms bound: le="0.001" */
    nb_metrics_route(NB_MR_EXEC, 1001);      /* just above it: le="0.0025" */
    nb_metrics_route(NB_MR_EXEC, 2000000);   /* 2 s: le="2.5" */
    nb_metrics_route(NB_MR_EXEC, 999000000); /* past the last bound: +Inf only */
    nb_metrics_route(NB_MR_EXEC, -7);        /* a clock step back counts as 0 */
    assert_int_equal(h->bucket[0], 2);
    assert_int_equal(h->bucket[1], 1);
    assert_int_equal(h->bucket[NB_HIST_BOUNDS], 1);
    assert_int_equal(h->sum_us, 1000 + 1001 + 2000000 + 999000000);
    text = render();
    assert_true(
        has_line(text, "nanobox_request_duration_seconds_bucket{route=\"exec\",le=\"0.001\"} 2"));
    assert_true(
        has_line(text, "nanobox_request_duration_seconds_bucket{route=\"exec\",le=\"0.0025\"} 3"));
    assert_true(
        has_line(text, "nanobox_request_duration_seconds_bucket{route=\"exec\",le=\"1\"} 3"));
    assert_true(
        has_line(text, "nanobox_request_duration_seconds_bucket{route=\"exec\",le=\"2.5\"} 4"));
    assert_true(
        has_line(text, "nanobox_request_duration_seconds_bucket{route=\"exec\",le=\"300\"} 4"));
    assert_true(
        has_line(text, "nanobox_request_duration_seconds_bucket{route=\"exec\",le=\"+Inf\"} 5"));
    assert_true(has_line(text, "nanobox_request_duration_seconds_sum{route=\"exec\"} 1001.002001"));
    assert_true(has_line(text, "nanobox_request_duration_seconds_count{route=\"exec\"} 5"));
    /* create, files and code are listed unused; a route never called is not */
    assert_true(has_line(text, "nanobox_request_duration_seconds_count{route=\"code\"} 0"));
    assert_null(strstr(text, "route=\"pause\""));
    free(text);
}

static void test_counters_and_gauges_render(void **state)
{
    char *text;
    (void)state;
    nb_metrics_create(NB_MC_COLD);
    nb_metrics_create(NB_MC_WARM);
    nb_metrics_create(NB_MC_WARM);
    nb_metrics_destroy(NB_MD_EXPIRED);
    nb_metrics_warm(1);
    nb_metrics_warm(0);
    nb_metrics_warm(0);
    nb_metrics_workers(5, 2);
    nb_metrics_docker(NB_MDK_CREATE, 30000, -1);
    nb_metrics_docker(NB_MDK_CREATE, 30000, NB_MDE_SERVER);
    nb_metrics_docker(NB_MDK_PING, 30000, NB_MDE_UNREACHABLE);
    text = render();
    assert_true(has_line(text, "# TYPE nanobox_sandbox_creates_total counter"));
    assert_true(has_line(text, "nanobox_sandbox_creates_total{source=\"cold\"} 1"));
    assert_true(has_line(text, "nanobox_sandbox_creates_total{source=\"warm\"} 2"));
    assert_true(has_line(text, "nanobox_sandbox_destroys_total{cause=\"expired\"} 1"));
    assert_true(has_line(text, "nanobox_sandbox_destroys_total{cause=\"api\"} 0"));
    assert_true(has_line(text, "nanobox_warm_pool_hits_total 1"));
    assert_true(has_line(text, "nanobox_warm_pool_misses_total 2"));
    assert_true(has_line(text, "nanobox_workers{state=\"busy\"} 2"));
    assert_true(has_line(text, "nanobox_workers{state=\"idle\"} 3"));
    assert_true(has_line(text, "nanobox_docker_request_duration_seconds_count{op=\"create\"} 2"));
    assert_true(
        has_line(text, "nanobox_docker_errors_total{op=\"create\",kind=\"server_error\"} 1"));
    assert_true(has_line(text, "nanobox_docker_errors_total{op=\"ping\",kind=\"unreachable\"} 1"));
    /* a Docker call never made has no series */
    assert_null(strstr(text, "op=\"unpause\""));
    free(text);
}

static void test_busy_never_exceeds_alive(void **state)
{
    char *text;
    (void)state;
    /* the two are stored one after the other: a reader between may see more busy */
    nb_metrics->workers_alive = 2;
    nb_metrics->workers_busy = 3;
    text = render();
    assert_true(has_line(text, "nanobox_workers{state=\"busy\"} 2"));
    assert_true(has_line(text, "nanobox_workers{state=\"idle\"} 0"));
    free(text);
}

static void test_errors_by_status_and_code(void **state)
{
    char *text;
    (void)state;
    nb_metrics_error(404, "not_found");
    nb_metrics_error(404, "not_found");
    nb_metrics_error(413, "too_large");
    nb_metrics_error(414, "too_large");      /* the same code under another status: its own */
    nb_metrics_error(400, "Bad \"code\"\n"); /* never a broken label */
    nb_metrics_error(500, "");
    text = render();
    assert_true(has_line(text, "nanobox_api_errors_total{status=\"404\",code=\"not_found\"} 2"));
    assert_true(has_line(text, "nanobox_api_errors_total{status=\"413\",code=\"too_large\"} 1"));
    assert_true(has_line(text, "nanobox_api_errors_total{status=\"414\",code=\"too_large\"} 1"));
    assert_true(has_line(text, "nanobox_api_errors_total{status=\"400\",code=\"_ad__code__\"} 1"));
    assert_true(has_line(text, "nanobox_api_errors_total{status=\"500\",code=\"unknown\"} 1"));
    free(text);
}

static void test_duplicate_claims_are_added_up(void **state)
{
    char *text;
    (void)state;
    /* what two processes claiming the same new pair at once leave behind */
    for (int i = 0; i < 2; i++) {
        struct nb_merror *e = &nb_metrics->errors[i];
        e->status = 503;
        snprintf(e->code, sizeof(e->code), "capacity");
        e->count = 3;
        e->state = 2;
    }
    nb_metrics_error(503, "capacity"); /* lands in the first */
    text = render();
    assert_true(has_line(text, "nanobox_api_errors_total{status=\"503\",code=\"capacity\"} 7"));
    assert_null(strstr(strstr(text, "code=\"capacity\"") + 1, "code=\"capacity\""));
    free(text);
}

static void test_errors_past_the_table_count_as_other(void **state)
{
    char code[32], *text;
    (void)state;
    for (int i = 0; i < NB_METRICS_ERRORS + 5; i++) {
        snprintf(code, sizeof(code), "code_%d", i);
        nb_metrics_error(400, code);
    }
    nb_metrics_error(400, "code_0"); /* a known pair still counts as itself */
    text = render();
    assert_true(has_line(text, "nanobox_api_errors_total{status=\"400\",code=\"code_0\"} 2"));
    assert_true(has_line(text, "nanobox_api_errors_total{status=\"other\",code=\"other\"} 5"));
    free(text);
}

static void test_docker_ops_from_paths(void **state)
{
    (void)state;
    assert_int_equal(nb_metrics_docker_op("GET", "/_ping"), NB_MDK_PING);
    assert_int_equal(nb_metrics_docker_op("POST", "/containers/create?name=nanobox-x"),
                     NB_MDK_CREATE);
    assert_int_equal(nb_metrics_docker_op("POST", "/containers/abc/start"), NB_MDK_START);
    assert_int_equal(nb_metrics_docker_op("GET", "/containers/abc/json"), NB_MDK_INSPECT);
    assert_int_equal(nb_metrics_docker_op("DELETE", "/containers/abc?force=1&v=1"), NB_MDK_REMOVE);
    assert_int_equal(nb_metrics_docker_op("DELETE", "/containers/abc"), NB_MDK_REMOVE);
    assert_int_equal(nb_metrics_docker_op("GET", "/containers/json?all=1&filters=%7B%7D"),
                     NB_MDK_LIST);
    assert_int_equal(nb_metrics_docker_op("POST", "/containers/abc/pause"), NB_MDK_PAUSE);
    assert_int_equal(nb_metrics_docker_op("POST", "/containers/abc/unpause"), NB_MDK_UNPAUSE);
    assert_int_equal(nb_metrics_docker_op("POST", "/containers/abc/exec"), NB_MDK_EXEC_CREATE);
    assert_int_equal(nb_metrics_docker_op("POST", "/exec/e1/start"), NB_MDK_EXEC_START);
    assert_int_equal(nb_metrics_docker_op("GET", "/exec/e1/json"), NB_MDK_EXEC_INSPECT);
    assert_int_equal(nb_metrics_docker_op("GET", "/networks/nanobox"), NB_MDK_NETWORK);
    assert_int_equal(nb_metrics_docker_op("POST", "/networks/create"), NB_MDK_NETWORK);
    assert_int_equal(nb_metrics_docker_op("GET", "/containers/abc"), NB_MDK_OTHER);
    assert_int_equal(nb_metrics_docker_op("GET", "/containers/abc/logs"), NB_MDK_OTHER);
    assert_int_equal(nb_metrics_docker_op("GET", "/images/json"), NB_MDK_OTHER);
    assert_int_equal(nb_metrics_docker_op("GET", ""), NB_MDK_OTHER);
}

static void test_label_escaping(void **state)
{
    struct nb_buf b;
    (void)state;
    nb_buf_init(&b, 1024);
    nb_metrics_label(&b, "a\\b\"c\nd");
    assert_string_equal(b.data, "a\\\\b\\\"c\\nd");
    nb_buf_free(&b);
}

/* The warm pools' demand: the workers' takes, the reaper's target, by pool. */
static void test_warm_pools_demand_across_processes(void **state)
{
    pid_t pids[CHILDREN];
    struct nb_mwarm m;
    (void)state;
    nb_metrics_warm_read(1, &m);
    assert_int_equal(m.hits + m.misses + m.published + m.last_take_ms, 0);
    for (int c = 0; c < CHILDREN; c++) {
        pids[c] = fork();
        assert_true(pids[c] >= 0);
        if (pids[c] == 0) {
            for (int i = 0; i < 1000; i++)
                nb_metrics_warm_take(1, i % 4 == 0, 1000 + c);
            _exit(0);
        }
    }
    for (int c = 0; c < CHILDREN; c++) {
        int st;
        assert_int_equal(waitpid(pids[c], &st, 0), pids[c]);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    nb_metrics_warm_target(1, 7);
    nb_metrics_warm_read(1, &m);
    assert_int_equal(m.hits, CHILDREN * 250);
    assert_int_equal(m.misses, CHILDREN * 750);
    assert_true(m.last_take_ms >= 1000 && m.last_take_ms < 1000 + CHILDREN);
    assert_int_equal(m.target, 7);
    assert_int_equal(m.published, 1);
    /* the other pools saw nothing; one out of range is ignored and reads as nothing */
    nb_metrics_warm_read(0, &m);
    assert_int_equal(m.hits + m.misses, 0);
    nb_metrics_warm_take(NB_METRICS_WARM_KINDS, 1, 5);
    nb_metrics_warm_read(NB_METRICS_WARM_KINDS, &m);
    assert_int_equal(m.hits, 0);
}

/* Every child adds ITERATIONS of each: the totals are exact, with no lock. */
static void test_many_processes_add_exactly(void **state)
{
    pid_t pids[CHILDREN];
    (void)state;
    for (int c = 0; c < CHILDREN; c++) {
        pids[c] = fork();
        assert_true(pids[c] >= 0);
        if (pids[c] == 0) {
            for (int i = 0; i < ITERATIONS; i++) {
                nb_metrics_route(NB_MR_CREATE, 10);
                nb_metrics_create(NB_MC_COLD);
                nb_metrics_error(409, i % 2 ? "conflict" : "paused");
            }
            _exit(0);
        }
    }
    for (int c = 0; c < CHILDREN; c++) {
        int st;
        assert_int_equal(waitpid(pids[c], &st, 0), pids[c]);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    assert_int_equal(nb_metrics->route[NB_MR_CREATE].bucket[0], CHILDREN * ITERATIONS);
    assert_int_equal(nb_metrics->route[NB_MR_CREATE].sum_us, CHILDREN * ITERATIONS * 10);
    assert_int_equal(nb_metrics->creates[NB_MC_COLD], CHILDREN * ITERATIONS);
    {
        char *text = render();
        char want[128];
        snprintf(want, sizeof(want), "nanobox_api_errors_total{status=\"409\",code=\"paused\"} %d",
                 CHILDREN * ITERATIONS / 2);
        assert_true(has_line(text, want));
        snprintf(want, sizeof(want),
                 "nanobox_api_errors_total{status=\"409\",code=\"conflict\"} %d",
                 CHILDREN * ITERATIONS / 2);
        assert_true(has_line(text, want));
        free(text);
    }
}

/* ------------------------------------------------------------ rate (ratelimit.h) */

static void test_rate_parse(void **state)
{
    uint32_t burst;
    int64_t iv;
    (void)state;
    assert_int_equal(nb_rate_parse("10r/s", &burst, &iv), 0);
    assert_int_equal(burst, 10);
    assert_int_equal(iv, 100000000);
    assert_int_equal(nb_rate_parse("30r/m", &burst, &iv), 0);
    assert_int_equal(burst, 30);
    assert_int_equal(iv, 2000000000);
    assert_int_equal(nb_rate_parse("", &burst, &iv), -1);
    assert_int_equal(nb_rate_parse("0r/s", &burst, &iv), -1);
    assert_int_equal(nb_rate_parse("5r/h", &burst, &iv), -1);
    assert_int_equal(nb_rate_parse("1234567r/s", &burst, &iv), -1);
}

static void test_rate_burst_then_refill(void **state)
{
    struct nb_rate_table *t = &nb_metrics->rate;
    int64_t now = 1000000000000LL, retry;
    (void)state;
    /* a full bucket: 5 at once, the 6th waits 1/5 s */
    for (int i = 0; i < 5; i++)
        assert_int_equal(nb_rate_take(t, "alice", "5r/s", now, &retry), 1);
    assert_int_equal(nb_rate_take(t, "alice", "5r/s", now, &retry), 0);
    assert_int_equal(retry, 200);
    /* another key is not touched by alice's bucket */
    assert_int_equal(nb_rate_take(t, "bob", "5r/s", now, &retry), 1);
    /* 200 ms later one more passes, and only one */
    assert_int_equal(nb_rate_take(t, "alice", "5r/s", now + 200000000, &retry), 1);
    assert_int_equal(nb_rate_take(t, "alice", "5r/s", now + 200000000, &retry), 0);
    /* a second later the bucket is full again */
    for (int i = 0; i < 5; i++)
        assert_int_equal(nb_rate_take(t, "alice", "5r/s", now + 1300000000, &retry), 1);
    /* no rate, an unreadable one, no table: never limited */
    assert_int_equal(nb_rate_take(t, "carol", "", now, &retry), 1);
    assert_int_equal(nb_rate_take(t, "carol", "x", now, &retry), 1);
    assert_int_equal(nb_rate_take(NULL, "carol", "1r/s", now, &retry), 1);
}

/* Many processes taking from one bucket at one instant: exactly burst pass. */
static void test_rate_many_processes_share_one_bucket(void **state)
{
    pid_t pids[CHILDREN];
    uint64_t *passed =
        mmap(NULL, sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int64_t now = nb_rate_now_ns() + 3600000000000LL;
    (void)state;
    assert_true(passed != MAP_FAILED);
    *passed = 0;
    for (int c = 0; c < CHILDREN; c++) {
        pids[c] = fork();
        assert_true(pids[c] >= 0);
        if (pids[c] == 0) {
            int64_t retry;
            for (int i = 0; i < 1000; i++) {
                /* every child also claims slots of its own names at the same time */
                char name[16];
                snprintf(name, sizeof(name), "k%d", i % 50);
                nb_rate_take(&nb_metrics->rate, name, "100r/s", now, &retry);
                if (nb_rate_take(&nb_metrics->rate, "shared", "500r/s", now, &retry))
                    __atomic_fetch_add(passed, 1, __ATOMIC_RELAXED);
            }
            _exit(0);
        }
    }
    for (int c = 0; c < CHILDREN; c++) {
        int st;
        assert_int_equal(waitpid(pids[c], &st, 0), pids[c]);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    assert_int_equal(*passed, 500);
    /* each name has one slot: k0..k49 and shared, none twice */
    {
        int used = 0;
        for (int i = 0; i < NB_RATE_SLOTS; i++)
            used += nb_metrics->rate.slot[i].state == 2;
        assert_int_equal(used, 51);
    }
    munmap(passed, sizeof(uint64_t));
}

/* What one check costs (printed, not asserted): the price of a limited key's request. */
static void test_rate_cost(void **state)
{
    int64_t retry, t0, t1;
    int n = 1000000;
    (void)state;
    for (int i = 0; i < 200; i++) {
        char name[16];
        snprintf(name, sizeof(name), "key%d", i);
        nb_rate_take(&nb_metrics->rate, name, "1r/s", 0, &retry);
    }
    t0 = nb_rate_now_ns();
    for (int i = 0; i < n; i++)
        nb_rate_take(&nb_metrics->rate, "key7", "999999r/s", nb_rate_now_ns(), &retry);
    t1 = nb_rate_now_ns();
    print_message("nb_rate_take: %.1f ns a call (200 keys in the table)\n", (double)(t1 - t0) / n);
}

/* ------------------------------------------------------------ cgstat */

static char tmp[64];

static void put(const char *rel, const char *content)
{
    char path[512], *slash;
    FILE *f;
    snprintf(path, sizeof(path), "%s/%s", tmp, rel);
    for (slash = path + strlen(tmp) + 1; (slash = strchr(slash, '/')) != NULL; slash++) {
        *slash = '\0';
        mkdir(path, 0755);
        *slash = '/';
    }
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(content, f);
    fclose(f);
}

static int cg_setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof(tmp), "/tmp/nb-test-cgstat-XXXXXX");
    return mkdtemp(tmp) == NULL ? -1 : 0;
}

static int cg_teardown(void **state)
{
    char cmd[128];
    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_cgroup_v2(void **state)
{
    char proc[128], root[128], err[256];
    struct nb_cgstat st;
    (void)state;
    put("proc/42/cgroup", "0::/system.slice/docker-abc123.scope\n");
    put("cg/cgroup.controllers", "cpu memory pids\n");
    put("cg/system.slice/docker-abc123.scope/cpu.stat",
        "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_periods 0\n");
    put("cg/system.slice/docker-abc123.scope/memory.current", "1048576\n");
    put("cg/system.slice/docker-abc123.scope/memory.peak", "2097152\n");
    put("cg/system.slice/docker-abc123.scope/memory.max", "268435456\n");
    put("cg/system.slice/docker-abc123.scope/pids.current", "3\n");
    put("cg/system.slice/docker-abc123.scope/pids.max", "max\n");
    snprintf(proc, sizeof(proc), "%s/proc", tmp);
    snprintf(root, sizeof(root), "%s/cg", tmp);
    assert_int_equal(nb_cgstat_read(proc, root, 42, "abc123", &st, err, sizeof(err)), 0);
    assert_int_equal(st.version, 2);
    assert_int_equal(st.cpu_usage_usec, 1500);
    assert_int_equal(st.cpu_user_usec, 1000);
    assert_int_equal(st.cpu_system_usec, 500);
    assert_int_equal(st.mem_current, 1048576);
    assert_int_equal(st.mem_peak, 2097152);
    assert_int_equal(st.mem_limit, 268435456);
    assert_int_equal(st.pids_current, 3);
    assert_int_equal(st.pids_limit, -1); /* "max": no limit */

    /* the pid now belongs to another container: refused */
    assert_int_equal(nb_cgstat_read(proc, root, 42, "def456", &st, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "no longer"));
    /* no such process */
    assert_int_equal(nb_cgstat_read(proc, root, 43, NULL, &st, err, sizeof(err)), -1);
    /* a path that climbs out of the hierarchy */
    put("proc/44/cgroup", "0::/../../etc\n");
    assert_int_equal(nb_cgstat_read(proc, root, 44, NULL, &st, err, sizeof(err)), -1);
}

static void test_cgroup_v1(void **state)
{
    char proc[128], root[128], err[256];
    struct nb_cgstat st;
    long hz = sysconf(_SC_CLK_TCK);
    (void)state;
    put("proc/7/cgroup", "9:name=systemd:/docker/c0ffee\n"
                         "8:pids:/docker/c0ffee\n"
                         "4:memory:/docker/c0ffee\n"
                         "2:cpu,cpuacct:/docker/c0ffee\n"
                         "0::/docker/c0ffee\n");
    put("v1/cpu,cpuacct/docker/c0ffee/cpuacct.usage", "2500000\n"); /* ns */
    put("v1/cpu,cpuacct/docker/c0ffee/cpuacct.stat", "user 3\nsystem 1\n");
    put("v1/memory/docker/c0ffee/memory.usage_in_bytes", "4096\n");
    put("v1/memory/docker/c0ffee/memory.max_usage_in_bytes", "8192\n");
    put("v1/memory/docker/c0ffee/memory.limit_in_bytes", "9223372036854771712\n");
    put("v1/pids/docker/c0ffee/pids.current", "5\n");
    put("v1/pids/docker/c0ffee/pids.max", "128\n");
    snprintf(proc, sizeof(proc), "%s/proc", tmp);
    snprintf(root, sizeof(root), "%s/v1", tmp);
    assert_int_equal(nb_cgstat_read(proc, root, 7, "c0ffee", &st, err, sizeof(err)), 0);
    assert_int_equal(st.version, 1);
    assert_int_equal(st.cpu_usage_usec, 2500);
    assert_int_equal(st.cpu_user_usec, 3 * 1000000 / hz);
    assert_int_equal(st.cpu_system_usec, 1 * 1000000 / hz);
    assert_int_equal(st.mem_current, 4096);
    assert_int_equal(st.mem_peak, 8192);
    assert_int_equal(st.mem_limit, -1); /* the kernel's "no limit" */
    assert_int_equal(st.pids_current, 5);
    assert_int_equal(st.pids_limit, 128);

    /* a hierarchy missing: its numbers unknown, the others still read */
    put("proc/8/cgroup", "4:memory:/docker/beef\n");
    put("v1/memory/docker/beef/memory.usage_in_bytes", "1\n");
    assert_int_equal(nb_cgstat_read(proc, root, 8, "beef", &st, err, sizeof(err)), 0);
    assert_int_equal(st.mem_current, 1);
    assert_int_equal(st.cpu_usage_usec, -1);
    assert_int_equal(st.pids_current, -1);
    /* none at all */
    put("proc/9/cgroup", "1:name=systemd:/x\n");
    assert_int_equal(nb_cgstat_read(proc, root, 9, NULL, &st, err, sizeof(err)), -1);
}

static void test_filesystem_usage_of_a_mount(void **state)
{
    int64_t used = -1, size = -1;
    char proc[128];
    (void)state;
    /* this process's own root, through /proc */
    assert_int_equal(nb_cgstat_fs("/proc", getpid(), "/tmp", &used, &size), 0);
    assert_true(size > 0 && used >= 0 && used <= size);
    assert_int_equal(nb_cgstat_fs("/proc", getpid(), "/tmp/../etc", &used, &size), -1);
    assert_int_equal(nb_cgstat_fs("/proc", getpid(), "relative", &used, &size), -1);
    assert_int_equal(nb_cgstat_fs("/proc", getpid(), "/no-such-dir-here", &used, &size), -1);
    snprintf(proc, sizeof(proc), "%s/proc", tmp);
    assert_int_equal(nb_cgstat_fs(proc, 0, "/tmp", &used, &size), -1);
}

/* ------------------------------------------------------------ usage history (history.h) */

#define H_SLOTS 3
#define H_CAP 4
#define ID_A "11111111-1111-4111-8111-111111111111"
#define ID_B "22222222-2222-4222-8222-222222222222"

static void test_history_ring_keeps_the_newest_in_order(void **state)
{
    struct nb_history h;
    struct nb_hsample out[8];
    void *mem = calloc(H_SLOTS, nb_history_ring_bytes(H_CAP));
    uint64_t disk_total;
    (void)state;
    assert_int_equal(sizeof(struct nb_hsample), 40);
    assert_int_equal(NB_HRING_HEAD, 64);
    nb_history_init(&h, mem, H_SLOTS, H_CAP, 5);
    /* created at 1000 s; 6 samples 5 s apart, 1 s of CPU (one CPU, 20 %) between each */
    for (int k = 0; k < 6; k++)
        nb_history_add(&h, 1, 7, ID_A, 1000, (1005 + 5 * k) * 1000LL, (uint64_t)(k + 1) * 1000000,
                       100 + k, 10 + k, 4096);
    assert_int_equal(nb_history_read(&h, 1, 7, ID_A, 0, INT64_MAX, out, 8, &disk_total), H_CAP);
    assert_int_equal(disk_total, 4096);
    for (int k = 0; k < H_CAP; k++) {
        assert_int_equal(out[k].t_ms, (1015 + 5 * k) * 1000LL); /* the two oldest went */
        assert_int_equal(out[k].mem, 102 + k);
        assert_int_equal(out[k].disk, 12 + k);
        assert_int_equal(out[k].cpu_centi, 2000);
    }
    /* a range, its bounds included */
    assert_int_equal(nb_history_read(&h, 1, 7, ID_A, 1020, 1025, out, 8, NULL), 2);
    assert_int_equal(out[0].t_ms, 1020000);
    assert_int_equal(nb_history_read(&h, 1, 7, ID_A, 1031, 2000, out, 8, NULL), 0);
    /* max bounds the copy */
    assert_int_equal(nb_history_read(&h, 1, 7, ID_A, 0, INT64_MAX, out, 1, NULL), 1);
    /* the other slots hold nothing; out of range reads nothing */
    assert_int_equal(nb_history_read(&h, 0, 7, ID_A, 0, INT64_MAX, out, 8, NULL), 0);
    assert_int_equal(nb_history_read(&h, H_SLOTS, 7, ID_A, 0, INT64_MAX, out, 8, NULL), 0);
    nb_history_add(&h, H_SLOTS, 7, ID_A, 1000, 1000, 1, 1, 1, 1); /* ignored */
    free(mem);
}

static void test_history_first_sample_averages_since_created(void **state)
{
    struct nb_history h;
    struct nb_hsample out[2];
    void *mem = calloc(1, nb_history_ring_bytes(H_CAP));
    (void)state;
    nb_history_init(&h, mem, 1, H_CAP, 5);
    /* 3 s of CPU over the 10 s since its creation: 30 % of one CPU */
    nb_history_add(&h, 0, 1, ID_A, 1000, 1010000, 3000000, 1, 1, 1);
    assert_int_equal(nb_history_read(&h, 0, 1, ID_A, 0, INT64_MAX, out, 2, NULL), 1);
    assert_int_equal(out[0].cpu_centi, 3000);
    free(mem);
}

static void test_history_of_a_reused_slot_shows_nothing_of_the_old(void **state)
{
    struct nb_history h;
    struct nb_hsample out[H_CAP];
    void *mem = calloc(H_SLOTS, nb_history_ring_bytes(H_CAP));
    (void)state;
    nb_history_init(&h, mem, H_SLOTS, H_CAP, 5);
    for (int k = 0; k < 3; k++)
        nb_history_add(&h, 2, 7, ID_A, 1000, (1005 + k) * 1000LL, 1, 111, 111, 111);
    /* the slot's next sandbox: another generation, another id, or both */
    assert_int_equal(nb_history_read(&h, 2, 8, ID_A, 0, INT64_MAX, out, H_CAP, NULL), 0);
    assert_int_equal(nb_history_read(&h, 2, 7, ID_B, 0, INT64_MAX, out, H_CAP, NULL), 0);
    assert_int_equal(nb_history_read(&h, 2, 8, ID_B, 0, INT64_MAX, out, H_CAP, NULL), 0);
    /* its first sample starts a ring of its own */
    nb_history_add(&h, 2, 8, ID_B, 2000, 2005000, 1, 222, 222, 222);
    assert_int_equal(nb_history_read(&h, 2, 8, ID_B, 0, INT64_MAX, out, H_CAP, NULL), 1);
    assert_int_equal(out[0].mem, 222);
    assert_int_equal(nb_history_read(&h, 2, 7, ID_A, 0, INT64_MAX, out, H_CAP, NULL), 0);
    /* cleared at its end: nothing for anyone, the memory zero */
    nb_history_clear(&h, 2);
    assert_int_equal(nb_history_read(&h, 2, 8, ID_B, 0, INT64_MAX, out, H_CAP, NULL), 0);
    for (size_t b = 0; b < nb_history_ring_bytes(H_CAP); b++)
        assert_int_equal(((unsigned char *)mem)[2 * nb_history_ring_bytes(H_CAP) + b], 0);
    free(mem);
}

static void test_history_off_and_unmapped_do_nothing(void **state)
{
    struct nb_hsample out[1];
    char err[128];
    (void)state;
    nb_history_add(NULL, 0, 1, ID_A, 0, 1000, 1, 1, 1, 1);
    nb_history_clear(NULL, 0);
    assert_int_equal(nb_history_read(NULL, 0, 1, ID_A, 0, INT64_MAX, out, 1, NULL), 0);
    /* metrics_history = 0: nothing mapped, nothing kept */
    assert_int_equal(nb_history_map(16, 0, 5, err, sizeof(err)), 0);
    nb_history_add(nb_history, 0, 1, ID_A, 0, 1000, 1, 1, 1, 1);
    assert_int_equal(nb_history_read(nb_history, 0, 1, ID_A, 0, INT64_MAX, out, 1, NULL), 0);
    nb_history_unmap();
    assert_null(nb_history);
}

/* A ring written by one process is read by another (MAP_SHARED), as the reaper and the workers do. */
static void test_history_is_shared_across_a_fork(void **state)
{
    struct nb_hsample out[2];
    char err[128];
    pid_t pid;
    int status;
    (void)state;
    assert_int_equal(nb_history_map(4, 8, 5, err, sizeof(err)), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        nb_history_add(nb_history, 3, 9, ID_A, 1000, 1005000, 1, 42, 43, 44);
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(nb_history_read(nb_history, 3, 9, ID_A, 0, INT64_MAX, out, 2, NULL), 1);
    assert_int_equal(out[0].mem, 42);
    nb_history_unmap();
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_nothing_is_recorded_before_the_block_is_mapped),
        T(test_histogram_buckets_sum_and_count),
        T(test_counters_and_gauges_render),
        T(test_busy_never_exceeds_alive),
        T(test_errors_by_status_and_code),
        T(test_duplicate_claims_are_added_up),
        T(test_errors_past_the_table_count_as_other),
        T(test_docker_ops_from_paths),
        T(test_label_escaping),
        T(test_many_processes_add_exactly),
        T(test_warm_pools_demand_across_processes),
        T(test_rate_parse),
        T(test_rate_burst_then_refill),
        T(test_rate_many_processes_share_one_bucket),
        T(test_rate_cost),
    };
    const struct CMUnitTest cg_tests[] = {
        cmocka_unit_test(test_cgroup_v2),
        cmocka_unit_test(test_cgroup_v1),
        cmocka_unit_test(test_filesystem_usage_of_a_mount),
    };
    const struct CMUnitTest history_tests[] = {
        cmocka_unit_test(test_history_ring_keeps_the_newest_in_order),
        cmocka_unit_test(test_history_first_sample_averages_since_created),
        cmocka_unit_test(test_history_of_a_reused_slot_shows_nothing_of_the_old),
        cmocka_unit_test(test_history_off_and_unmapped_do_nothing),
        cmocka_unit_test(test_history_is_shared_across_a_fork),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    failed += cmocka_run_group_tests(history_tests, NULL, NULL);
    return failed + cmocka_run_group_tests(cg_tests, cg_setup, cg_teardown);
}
