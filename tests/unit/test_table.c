/*
 * test_table.c - the shared state table: creation, slots, the slot state
 * machine transition by transition (allowed and refused), survival of
 * crashes, refusal of foreign files, resizing, and the robust lock under
 * many processes and under processes that die holding it.
 *
 * Forked children never call cmocka assertions (a failing one would jump
 * back into the child's copy of the test runner): they report through
 * their exit status, which the parent asserts.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"
#include "table.h"

#define HAMMER_CHILDREN 8
#define HAMMER_ITERATIONS 2000
#define RACE_CHILDREN 6
#define RACE_ROUNDS 10

struct fixture {
    char dir[64];
    char path[128];
    char err[256];
    int saved_stderr;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    if (f == NULL)
        return -1;
    snprintf(f->dir, sizeof(f->dir), "/tmp/nb-test-table-XXXXXX");
    if (mkdtemp(f->dir) == NULL) {
        free(f);
        return -1;
    }
    snprintf(f->path, sizeof(f->path), "%s/state", f->dir);
    f->saved_stderr = -1;
    *state = f;
    alarm(60); /* a lock bug must fail the run, not hang it */
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    DIR *d = opendir(f->dir);
    struct dirent *e;

    alarm(0);
    if (d != NULL) {
        while ((e = readdir(d)) != NULL) {
            char p[512];
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(p, sizeof(p), "%s/%s", f->dir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(f->dir);
    free(f);
    return 0;
}

/* Send our log lines (stderr) to a file until capture_end. */
static void capture_begin(struct fixture *f)
{
    char p[256];
    int fd;

    snprintf(p, sizeof(p), "%s/stderr", f->dir);
    fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    f->saved_stderr = dup(STDERR_FILENO);
    assert_true(f->saved_stderr >= 0);
    assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
    close(fd);
}

/* Restore stderr; returns what was logged meanwhile (static buffer). */
static const char *capture_end(struct fixture *f)
{
    static char text[4096];
    char p[256];
    ssize_t n;
    int fd;

    assert_int_equal(dup2(f->saved_stderr, STDERR_FILENO), STDERR_FILENO);
    close(f->saved_stderr);
    f->saved_stderr = -1;
    snprintf(p, sizeof(p), "%s/stderr", f->dir);
    fd = open(p, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    n = read(fd, text, sizeof(text) - 1);
    close(fd);
    unlink(p);
    text[n > 0 ? n : 0] = '\0';
    return text;
}

static void open_ok(struct fixture *f, struct nb_table *t, uint32_t nslots)
{
    int rc = nb_table_open(t, f->path, nslots, f->err, sizeof(f->err));

    if (rc != 0)
        fail_msg("nb_table_open: %s", f->err);
}

static off_t file_size(const char *path)
{
    struct stat st;

    assert_int_equal(stat(path, &st), 0);
    return st.st_size;
}

static off_t expected_size(uint32_t nslots)
{
    return (off_t)(sizeof(struct nb_table_header) + nslots * sizeof(struct nb_slot));
}

static void patch_header(const char *path, size_t off, const void *data, size_t len)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);

    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, data, len, (off_t)off), (ssize_t)len);
    close(fd);
}

static void reserve_ok(struct nb_table *t, const char *id)
{
    nb_table_lock(t);
    assert_non_null(nb_table_reserve(t, id, 1000, 2000));
    nb_table_unlock(t);
}

static void wait_exit_ok(pid_t pid)
{
    int status;

    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- creation ---- */

static void test_create_writes_header_file_size_and_mode(void **state)
{
    struct fixture *f = *state;
    struct nb_table t;
    struct stat st;

    open_ok(f, &t, 8);
    assert_memory_equal(t.hdr->magic, NB_TABLE_MAGIC, 8);
    assert_int_equal(t.hdr->version, NB_TABLE_VERSION);
    assert_int_equal(t.hdr->slot_size, sizeof(struct nb_slot));
    assert_int_equal(t.hdr->nslots, 8);
    assert_int_equal(t.nslots, 8);
    assert_int_equal(t.hdr->generation, 0);
    assert_int_equal(nb_table_count(&t), 0);
    assert_int_equal(file_size(f->path), expected_size(8));
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_true(fcntl(t.fd, F_GETFD) & FD_CLOEXEC);
    nb_table_close(&t);
    assert_int_equal(t.fd, -1);
    assert_null(t.hdr);
}

static void test_open_rejects_zero_slots_and_bad_path(void **state)
{
    struct fixture *f = *state;
    struct nb_table t;
    char path[256];

    assert_int_equal(nb_table_open(&t, f->path, 0, f->err, sizeof(f->err)), -1);
    assert_non_null(strstr(f->err, "out of range"));
    snprintf(path, sizeof(path), "%s/missing/state", f->dir);
    assert_int_equal(nb_table_open(&t, path, 4, f->err, sizeof(f->err)), -1);
    assert_non_null(strstr(f->err, path));
    assert_non_null(strstr(f->err, strerror(ENOENT)));
    assert_int_equal(t.fd, -1);
    assert_null(t.hdr);
}

/* ---- slots ---- */

static void test_reserve_fills_a_creating_slot(void **state)
{
    struct fixture *f = *state;
    const char *id = "0f8fad5b-d9cb-469f-a165-70867728950e";
    struct nb_table t;
    struct nb_slot *s;

    open_ok(f, &t, 4);
    nb_table_lock(&t);
    s = nb_table_reserve(&t, id, 1700000000, 1700001800);
    assert_non_null(s);
    assert_int_equal(s->state, NB_SLOT_CREATING);
    assert_int_equal(s->generation, 1);
    assert_string_equal(s->id, id);
    assert_int_equal(s->owner_pid, getpid());
    assert_int_equal(s->state_since, 1700000000);
    assert_int_equal(s->created, 1700000000);
    assert_int_equal(s->expires, 1700001800);
    assert_string_equal(s->metadata, "{}");
    assert_string_equal(s->container_id, "");
    assert_string_equal(s->image, "");
    assert_int_equal(s->init_pid, 0);
    assert_int_equal(s->ports[0].sandboxport, 0);
    assert_ptr_equal(nb_table_find(&t, id), s);
    assert_int_equal(nb_table_count(&t), 1);
    nb_table_unlock(&t);
    nb_table_close(&t);
}

static void test_find_matches_whole_id_only(void **state)
{
    struct fixture *f = *state;
    struct nb_table t;
    struct nb_slot *a, *b;

    open_ok(f, &t, 4);
    nb_table_lock(&t);
    a = nb_table_reserve(&t, "abc", 1, 2);
    b = nb_table_reserve(&t, "abcd", 1, 2);
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    assert_ptr_equal(nb_table_find(&t, "abc"), a);
    assert_ptr_equal(nb_table_find(&t, "abcd"), b);
    assert_null(nb_table_find(&t, "ab"));
    assert_null(nb_table_find(&t, "abcde"));
    assert_null(nb_table_find(&t, ""));
    nb_table_unlock(&t);
    nb_table_close(&t);
}

static void test_release_frees_slot_and_keeps_generation(void **state)
{
    struct fixture *f = *state;
    struct nb_table t;
    struct nb_slot *s, *again, zero;
    uint32_t gen;

    open_ok(f, &t, 4);
    nb_table_lock(&t);
    s = nb_table_reserve(&t, "sb-1", 10, 20);
    assert_non_null(s);
    assert_non_null(nb_table_commit(&t, "sb-1", s->generation, NB_SLOT_RUNNING, "c0ffee", 7, 10));
    s->ports[3].sandboxport = 8080;
    gen = s->generation;
    nb_table_release(&t, s);

    memset(&zero, 0, sizeof(zero));
    zero.generation = gen;
    assert_memory_equal(s, &zero, sizeof(zero));
    assert_null(nb_table_find(&t, "sb-1"));
    assert_int_equal(nb_table_count(&t), 0);

    again = nb_table_reserve(&t, "sb-2", 10, 20);
    assert_ptr_equal(again, s); /* first free slot */
    assert_int_equal(again->generation, gen + 1);
    nb_table_unlock(&t);
    nb_table_close(&t);
}

static void test_full_table_returns_null(void **state)
{
    struct fixture *f = *state;
    struct nb_table t;
    struct nb_slot *s[4];
    char id[16];

    open_ok(f, &t, 4);
    nb_table_lock(&t);
    for (int i = 0; i < 4; i++) {
        snprintf(id, sizeof(id), "sb-%d", i);
        s[i] = nb_table_reserve(&t, id, 1, 2);
        assert_non_null(s[i]);
        for (int j = 0; j < i; j++)
            assert_ptr_not_equal(s[i], s[j]);
    }
    assert_null(nb_table_reserve(&t, "one-too-many", 1, 2));
    assert_int_equal(nb_table_count(&t), 4);
    assert_null(nb_table_find(&t, "one-too-many"));

    nb_table_release(&t, s[2]);
    assert_ptr_equal(nb_table_reserve(&t, "late", 1, 2), s[2]);
    assert_int_equal(nb_table_count(&t), 4);
    nb_table_unlock(&t);
    nb_table_close(&t);
}

static void test_generation_skips_zero_on_wrap(void **state)
{
    struct fixture *f = *state;
    struct nb_table t;
    struct nb_slot *s;

    open_ok(f, &t, 2);
    nb_table_lock(&t);
    t.hdr->generation = UINT32_MAX;
    s = nb_table_reserve(&t, "wrap", 1, 2);
    assert_non_null(s);
    assert_int_not_equal(s->generation, 0);
    assert_int_equal(s->generation, 1);
    nb_table_unlock(&t);
    nb_table_close(&t);
}

/* ---- the slot state machine ---- */

#define SM_ID "0f8fad5b-d9cb-469f-a165-70867728950e"

/*
 * A slot of id brought to state through the transitions themselves (so a
 * broken transition fails here, at the step that broke).
 */
static struct nb_slot *slot_in(struct nb_table *t, const char *id, enum nb_slot_state state)
{
    struct nb_slot *s = nb_table_reserve(t, id, 100, 200);

    assert_non_null(s);
    snprintf(s->image, sizeof(s->image), "%s", "img");
    switch (state) {
    case NB_SLOT_CREATING:
        break;
    case NB_SLOT_RUNNING:
    case NB_SLOT_POOLED:
        assert_ptr_equal(nb_table_commit(t, id, s->generation, state, "cid", 7, 101), s);
        break;
    case NB_SLOT_DESTROYING:
        assert_ptr_equal(nb_table_commit(t, id, s->generation, NB_SLOT_RUNNING, "cid", 7, 101), s);
        assert_int_equal(nb_table_mark_destroying(t, s, NB_SLOT_RUNNING, 102), 0);
        break;
    case NB_SLOT_PAUSED:
        assert_ptr_equal(nb_table_commit(t, id, s->generation, NB_SLOT_RUNNING, "cid", 7, 101), s);
        assert_int_equal(nb_table_pause(t, s, 150, 1000), 0);
        break;
    case NB_SLOT_FREE:
        nb_table_release(t, s);
        break;
    }
    assert_int_equal(s->state, state);
    return s;
}

/* The slot is exactly as before: a refused transition changes nothing. */
static void assert_unchanged(const struct nb_slot *s, const struct nb_slot *before)
{
    assert_memory_equal(s, before, sizeof(*before));
}

static void test_commit_makes_a_creating_slot_running_or_pooled(void **state)
{
    struct fixture *f = *state;
    enum nb_slot_state to[] = {NB_SLOT_RUNNING, NB_SLOT_POOLED};
    struct nb_table t;

    open_ok(f, &t, 4);
    nb_table_lock(&t);
    for (size_t i = 0; i < 2; i++) {
        char id[16];
        struct nb_slot *s;

        snprintf(id, sizeof(id), "sb-%zu", i);
        s = nb_table_reserve(&t, id, 100, 200);
        assert_non_null(s);
        assert_ptr_equal(nb_table_commit(&t, id, s->generation, to[i], "c0ffee", 4242, 150), s);
        assert_int_equal(s->state, to[i]);
        assert_string_equal(s->container_id, "c0ffee");
        assert_int_equal(s->init_pid, 4242);
        assert_int_equal(s->owner_pid, 0);
        assert_int_equal(s->state_since, 150);
        assert_int_equal(s->created, 100);
        assert_int_equal(s->expires, 200);
    }
    nb_table_unlock(&t);
    nb_table_close(&t);
}

static void test_commit_refused_for_another_generation(void **state)
{
    struct fixture *f = *state;
    struct nb_table t;
    struct nb_slot *s, before;
    uint32_t old;

    open_ok(f, &t, 4);
    nb_table_lock(&t);
    /* the slot was freed and reserved again for the same id meanwhile */
    s = slot_in(&t, SM_ID, NB_SLOT_CREATING);
    old = s->generation;
    nb_table_release(&t, s);
    s = slot_in(&t, SM_ID, NB_SLOT_CREATING);
    assert_int_not_equal(s->generation, old);
    before = *s;
    assert_null(nb_table_commit(&t, SM_ID, old, NB_SLOT_RUNNING, "c", 1, 150));
    assert_unchanged(s, &before);
    assert_null(nb_table_commit(&t, "no-such-id", s->generation, NB_SLOT_RUNNING, "c", 1, 150));
    assert_unchanged(s, &before);
    nb_table_unlock(&t);
    nb_table_close(&t);
}

static void test_commit_refused_unless_creating(void **state)
{
    struct fixture *f = *state;
    enum nb_slot_state from[] = {NB_SLOT_RUNNING, NB_SLOT_POOLED, NB_SLOT_DESTROYING};
    struct nb_table t;

    open_ok(f, &t, 4);
    nb_table_lock(&t);
    for (size_t i = 0; i < 3; i++) {
        char id[16];
        struct nb_slot *s, before;

        snprintf(id, sizeof(id), "sb-%zu", i);
        s = slot_in(&t, id, from[i]);
        before = *s;
        /* a create whose slot reconciliation took over must not revive it */
        assert_null(nb_table_commit(&t, id, s->generation, NB_SLOT_RUNNING, "x", 1, 150));
        assert_unchanged(s, &before);
    }
    nb_table_unlock(&t);
    nb_table_close(&t);
}

static void test_commit_refused_to_a_state_that_is_not_up(void **state)
{
    struct fixture *f = *state;
    enum nb_slot_state to[] = {NB_SLOT_FREE, NB_SLOT_CREATING, NB_SLOT_DESTROYING};
    struct nb_table t;
    struct nb_slot *s, before;

    open_ok(f, &t, 4);
    nb_table_lock(&t);
    s = slot_in(&t, SM_ID, NB_SLOT_CREATING);
    before = *s;
    for (size_t i = 0; i < 3; i++) {
        assert_null(nb_table_commit(&t, SM_ID, s->generation, to[i], "x", 1, 150));
        assert_unchanged(s, &before);
    }
    nb_table_unlock(&t);
    nb_table_close(&t);
}

static void test_hand_out_turns_a_warm_slot_of_the_image_running(void **state)
{
    struct fixture *f = *state;
    struct nb_table t;
    struct nb_slot *running, *other, *warm, *e2b, before;

    open_ok(f, &t, 5);
    nb_table_lock(&t);
    running = slot_in(&t, "running", NB_SLOT_RUNNING);
    other = slot_in(&t, "other-image", NB_SLOT_POOLED);
    snprintf(other->image, sizeof(other->image), "%s", "img2");
    warm = slot_in(&t, "warm", NB_SLOT_POOLED);
    before = *other;

    e2b = slot_in(&t, "warm-e2b", NB_SLOT_POOLED);
    e2b->lifecycle = NB_LIFE_E2B_HOME;
    /* E2B's layout only to E2B's creates, and the other way round */
    assert_ptr_equal(nb_table_hand_out(&t, "img", NB_LIFE_E2B_HOME, 500, 800), e2b);
    assert_null(nb_table_hand_out(&t, "img", NB_LIFE_E2B_HOME, 500, 800));
    assert_ptr_equal(nb_table_hand_out(&t, "img", 0, 500, 800), warm);
    assert_int_equal(warm->state, NB_SLOT_RUNNING);
    assert_int_equal(warm->created, 500);
    assert_int_equal(warm->expires, 800);
    assert_int_equal(warm->state_since, 500);
    assert_int_equal(warm->owner_pid, 0);
    assert_string_equal(warm->container_id, "cid");
    assert_unchanged(other, &before);
    assert_int_equal(running->state, NB_SLOT_RUNNING);

    /* no warm slot of that image is left, and RUNNING ones are never handed out */
    assert_null(nb_table_hand_out(&t, "img", 0, 600, 900));
    assert_int_equal(running->created, 100);
    assert_ptr_equal(nb_table_hand_out(&t, "img2", 0, 600, 900), other);
    assert_int_equal(nb_table_count_state(&t, NB_SLOT_POOLED), 0);
    assert_int_equal(nb_table_count_state(&t, NB_SLOT_RUNNING), 4);
    nb_table_unlock(&t);
    nb_table_close(&t);
}

static void test_mark_destroying_from_the_state_the_caller_saw(void **state)
{
    struct fixture *f = *state;
    enum nb_slot_state from[] = {NB_SLOT_RUNNING, NB_SLOT_POOLED};
    struct nb_table t;

    open_ok(f, &t, 4);
    nb_table_lock(&t);
    for (size_t i = 0; i < 2; i++) {
        char id[16];
        struct nb_slot *s;
        uint32_t gen;

        snprintf(id, sizeof(id), "sb-%zu", i);
        s = slot_in(&t, id, from[i]);
        gen = s->generation;
        assert_int_equal(nb_table_mark_destroying(&t, s, from[i], 300), 0);
        assert_int_equal(s->state, NB_SLOT_DESTROYING);
        assert_int_equal(s->owner_pid, getpid());
        assert_int_equal(s->state_since, 300);
        assert_int_equal(s->generation, gen);
        assert_string_equal(s->container_id, "cid"); /* still known: it is to be removed */
    }
    nb_table_unlock(&t);
    nb_table_close(&t);
}

static void test_mark_destroying_refused_from_another_state(void **state)
{
    struct fixture *f = *state;
    struct nb_table t;
    struct nb_slot *running, *warm, *creating, *destroying, before;

    open_ok(f, &t, 4);
    nb_table_lock(&t);
    running = slot_in(&t, "running", NB_SLOT_RUNNING);
    warm = slot_in(&t, "warm", NB_SLOT_POOLED);
    creating = slot_in(&t, "creating", NB_SLOT_CREATING);
    destroying = slot_in(&t, "destroying", NB_SLOT_DESTROYING);

    /* a DELETE never takes a warm slot; the pool never takes a user's */
    before = *warm;
    assert_int_equal(nb_table_mark_destroying(&t, warm, NB_SLOT_RUNNING, 300), -1);
    assert_unchanged(warm, &before);
    before = *running;
    assert_int_equal(nb_table_mark_destroying(&t, running, NB_SLOT_POOLED, 300), -1);
    assert_unchanged(running, &before);
    /* only RUNNING and POOLED may be marked, whatever the caller claims */
    before = *creating;
    assert_int_equal(nb_table_mark_destroying(&t, creating, NB_SLOT_CREATING, 300), -1);
    assert_unchanged(creating, &before);
    before = *destroying;
    assert_int_equal(nb_table_mark_destroying(&t, destroying, NB_SLOT_DESTROYING, 300), -1);
    assert_int_equal(nb_table_mark_destroying(&t, destroying, NB_SLOT_RUNNING, 300), -1);
    assert_unchanged(destroying, &before);
    nb_table_unlock(&t);
    nb_table_close(&t);
}

static void test_unmark_destroying_gives_the_sandbox_back(void **state)
{
    struct fixture *f = *state;
    struct nb_table t;
    struct nb_slot *s;

    open_ok(f, &t, 4);
    nb_table_lock(&t);
    s = slot_in(&t, SM_ID, NB_SLOT_DESTROYING);
    assert_int_equal(nb_table_unmark_destroying(&t, SM_ID, s->generation), 0);
    assert_int_equal(s->state, NB_SLOT_RUNNING);
    assert_int_equal(s->owner_pid, 0);
    assert_string_equal(s->container_id, "cid");
    /* and it can be destroyed again */
    assert_int_equal(nb_table_mark_destroying(&t, s, NB_SLOT_RUNNING, 400), 0);
    nb_table_unlock(&t);
    nb_table_close(&t);
}

static void test_unmark_destroying_refused_unless_destroying_of_that_generation(void **state)
{
    struct fixture *f = *state;
    enum nb_slot_state from[] = {NB_SLOT_CREATING, NB_SLOT_RUNNING, NB_SLOT_POOLED};
    struct nb_table t;
    struct nb_slot *s, before;

    open_ok(f, &t, 8);
    nb_table_lock(&t);
    for (size_t i = 0; i < 3; i++) {
        char id[16];

        snprintf(id, sizeof(id), "sb-%zu", i);
        s = slot_in(&t, id, from[i]);
        before = *s;
        assert_int_equal(nb_table_unmark_destroying(&t, id, s->generation), -1);
        assert_unchanged(s, &before);
    }
    s = slot_in(&t, SM_ID, NB_SLOT_DESTROYING);
    before = *s;
    assert_int_equal(nb_table_unmark_destroying(&t, SM_ID, s->generation + 1), -1);
    assert_int_equal(nb_table_unmark_destroying(&t, "no-such-id", s->generation), -1);
    assert_unchanged(s, &before);
    nb_table_unlock(&t);
    nb_table_close(&t);
}

static void test_pause_stops_the_ttl_and_resume_gives_the_rest(void **state)
{
    struct fixture *f = *state;
    struct nb_table t;
    struct nb_slot *s;
    uint32_t gen;

    open_ok(f, &t, 4);
    nb_table_lock(&t);
    s = slot_in(&t, SM_ID, NB_SLOT_RUNNING); /* expires at 200 */
    gen = s->generation;
    assert_int_equal(nb_table_pause(&t, s, 150, 1150), 0);
    assert_int_equal(s->state, NB_SLOT_PAUSED);
    assert_int_equal(s->ttl_left, 50);
    assert_int_equal(s->pause_expires, 1150);
    assert_int_equal(s->state_since, 150);
    assert_int_equal(s->owner_pid, 0);
    assert_int_equal(s->generation, gen);
    assert_string_equal(s->container_id, "cid");
    /* an hour later, the 50 s left go on from the resume */
    assert_int_equal(nb_table_resume(&t, s, 3750), 0);
    assert_int_equal(s->state, NB_SLOT_RUNNING);
    assert_int_equal(s->expires, 3800);
    assert_int_equal(s->ttl_left, 0);
    assert_int_equal(s->pause_expires, 0);
    assert_int_equal(s->state_since, 3750);
    assert_int_equal(s->generation, gen);
    nb_table_unlock(&t);
    nb_table_close(&t);
}

static void test_pause_of_an_expired_slot_keeps_a_second(void **state)
{
    struct fixture *f = *state;
    struct nb_table t;
    struct nb_slot *s;

    open_ok(f, &t, 4);
    nb_table_lock(&t);
    s = slot_in(&t, SM_ID, NB_SLOT_RUNNING); /* expires at 200 */
    assert_int_equal(nb_table_pause(&t, s, 250, 1250), 0);
    assert_int_equal(s->ttl_left, 1);
    nb_table_unlock(&t);
    nb_table_close(&t);
}

static void test_pause_refused_unless_running(void **state)
{
    struct fixture *f = *state;
    enum nb_slot_state from[] = {NB_SLOT_CREATING, NB_SLOT_POOLED, NB_SLOT_DESTROYING,
                                 NB_SLOT_PAUSED};
    struct nb_table t;

    open_ok(f, &t, 8);
    nb_table_lock(&t);
    for (size_t i = 0; i < 4; i++) {
        char id[16];
        struct nb_slot *s, before;

        snprintf(id, sizeof(id), "sb-%zu", i);
        s = slot_in(&t, id, from[i]);
        before = *s;
        assert_int_equal(nb_table_pause(&t, s, 300, 900), -1);
        assert_unchanged(s, &before);
    }
    nb_table_unlock(&t);
    nb_table_close(&t);
}

static void test_resume_refused_unless_paused(void **state)
{
    struct fixture *f = *state;
    enum nb_slot_state from[] = {NB_SLOT_CREATING, NB_SLOT_RUNNING, NB_SLOT_POOLED,
                                 NB_SLOT_DESTROYING};
    struct nb_table t;

    open_ok(f, &t, 8);
    nb_table_lock(&t);
    for (size_t i = 0; i < 4; i++) {
        char id[16];
        struct nb_slot *s, before;

        snprintf(id, sizeof(id), "sb-%zu", i);
        s = slot_in(&t, id, from[i]);
        before = *s;
        assert_int_equal(nb_table_resume(&t, s, 300), -1);
        assert_unchanged(s, &before);
    }
    nb_table_unlock(&t);
    nb_table_close(&t);
}

static void test_a_paused_slot_is_destroyed_and_given_back_paused(void **state)
{
    struct fixture *f = *state;
    struct nb_table t;
    struct nb_slot *s, before;

    open_ok(f, &t, 4);
    nb_table_lock(&t);
    s = slot_in(&t, SM_ID, NB_SLOT_PAUSED);
    /* a DELETE judged it running: refused */
    before = *s;
    assert_int_equal(nb_table_mark_destroying(&t, s, NB_SLOT_RUNNING, 300), -1);
    assert_unchanged(s, &before);
    assert_int_equal(nb_table_mark_destroying(&t, s, NB_SLOT_PAUSED, 300), 0);
    assert_int_equal(s->state, NB_SLOT_DESTROYING);
    /* the removal failed: it is paused again, its TTLs as they were */
    assert_int_equal(nb_table_unmark_destroying(&t, SM_ID, s->generation), 0);
    assert_int_equal(s->state, NB_SLOT_PAUSED);
    assert_int_equal(s->ttl_left, 50);
    assert_int_equal(s->pause_expires, 1000);
    nb_table_unlock(&t);
    nb_table_close(&t);
}

static void test_take_over_an_abandoned_creating_or_destroying_slot(void **state)
{
    struct fixture *f = *state;
    enum nb_slot_state from[] = {NB_SLOT_CREATING, NB_SLOT_DESTROYING};
    struct nb_table t;

    open_ok(f, &t, 4);
    nb_table_lock(&t);
    for (size_t i = 0; i < 2; i++) {
        char id[16];
        struct nb_slot *s;
        uint32_t gen;

        snprintf(id, sizeof(id), "sb-%zu", i);
        s = slot_in(&t, id, from[i]);
        s->owner_pid = 999999; /* as a dead worker leaves it */
        gen = s->generation;
        assert_int_equal(nb_table_take_over(&t, s, 700), 0);
        assert_int_equal(s->state, NB_SLOT_DESTROYING);
        assert_int_equal(s->owner_pid, getpid());
        assert_int_equal(s->state_since, 700);
        assert_int_equal(s->generation, gen);
    }
    nb_table_unlock(&t);
    nb_table_close(&t);
}

static void test_take_over_refused_from_a_settled_state(void **state)
{
    struct fixture *f = *state;
    enum nb_slot_state from[] = {NB_SLOT_RUNNING, NB_SLOT_POOLED, NB_SLOT_FREE};
    struct nb_table t;

    open_ok(f, &t, 4);
    nb_table_lock(&t);
    for (size_t i = 0; i < 3; i++) {
        char id[16];
        struct nb_slot *s, before;

        snprintf(id, sizeof(id), "sb-%zu", i);
        s = slot_in(&t, id, from[i]);
        before = *s;
        assert_int_equal(nb_table_take_over(&t, s, 700), -1);
        assert_unchanged(s, &before);
    }
    nb_table_unlock(&t);
    nb_table_close(&t);
}

static void test_disown_leaves_the_slot_to_reconciliation(void **state)
{
    struct fixture *f = *state;
    struct nb_table t;
    struct nb_slot *s, *running, before;

    open_ok(f, &t, 4);
    nb_table_lock(&t);
    s = slot_in(&t, SM_ID, NB_SLOT_CREATING);
    assert_int_equal(nb_table_disown(&t, SM_ID, s->generation + 1), -1);
    assert_int_equal(s->owner_pid, getpid());
    assert_int_equal(nb_table_disown(&t, SM_ID, s->generation), 0);
    assert_int_equal(s->owner_pid, 0);
    assert_int_equal(s->state, NB_SLOT_CREATING);
    running = slot_in(&t, "running", NB_SLOT_RUNNING);
    before = *running;
    assert_int_equal(nb_table_disown(&t, "running", running->generation), -1);
    assert_unchanged(running, &before);
    nb_table_unlock(&t);
    nb_table_close(&t);
}

static void test_free_only_the_slot_of_that_generation(void **state)
{
    struct fixture *f = *state;
    enum nb_slot_state from[] = {NB_SLOT_CREATING, NB_SLOT_DESTROYING};
    struct nb_table t;
    struct nb_slot *s, before;
    uint32_t old;

    open_ok(f, &t, 4);
    nb_table_lock(&t);
    for (size_t i = 0; i < 2; i++) {
        s = slot_in(&t, SM_ID, from[i]);
        assert_int_equal(nb_table_free(&t, SM_ID, s->generation), 0);
        assert_int_equal(s->state, NB_SLOT_FREE);
        assert_null(nb_table_find(&t, SM_ID));
    }
    /* freed, then reused for the same id: the late free of the old one is refused */
    s = slot_in(&t, SM_ID, NB_SLOT_DESTROYING);
    old = s->generation;
    nb_table_release(&t, s);
    s = slot_in(&t, SM_ID, NB_SLOT_CREATING);
    before = *s;
    assert_int_equal(nb_table_free(&t, SM_ID, old), -1);
    assert_unchanged(s, &before);
    nb_table_unlock(&t);
    nb_table_close(&t);
}

static void test_free_refused_for_a_live_slot(void **state)
{
    struct fixture *f = *state;
    enum nb_slot_state from[] = {NB_SLOT_RUNNING, NB_SLOT_POOLED};
    struct nb_table t;

    open_ok(f, &t, 4);
    nb_table_lock(&t);
    for (size_t i = 0; i < 2; i++) {
        char id[16];
        struct nb_slot *s, before;

        snprintf(id, sizeof(id), "sb-%zu", i);
        s = slot_in(&t, id, from[i]);
        before = *s;
        assert_int_equal(nb_table_free(&t, id, s->generation), -1);
        assert_unchanged(s, &before);
    }
    assert_int_equal(nb_table_free(&t, "no-such-id", 1), -1);
    assert_int_equal(nb_table_count(&t), 2);
    nb_table_unlock(&t);
    nb_table_close(&t);
}

/* ---- survival ---- */

static void test_data_survives_close_and_reopen(void **state)
{
    struct fixture *f = *state;
    struct nb_table t;
    struct nb_slot *s;

    open_ok(f, &t, 4);
    nb_table_lock(&t);
    s = nb_table_reserve(&t, "kept", 5, 6);
    assert_non_null(s);
    assert_non_null(nb_table_commit(&t, "kept", s->generation, NB_SLOT_RUNNING, "c1", 42, 5));
    snprintf(s->metadata, sizeof(s->metadata), "%s", "{\"owner\":\"me\"}");
    nb_table_unlock(&t);
    nb_table_close(&t);

    open_ok(f, &t, 4);
    s = nb_table_find(&t, "kept");
    assert_non_null(s);
    assert_int_equal(s->state, NB_SLOT_RUNNING);
    assert_string_equal(s->metadata, "{\"owner\":\"me\"}");
    assert_int_equal(t.hdr->generation, 1);
    nb_table_close(&t);
}

static void test_data_survives_a_crash_without_cleanup(void **state)
{
    struct fixture *f = *state;
    struct nb_table t;
    struct nb_slot *s;
    pid_t pid;

    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct nb_table ct;
        struct nb_slot *cs;
        if (nb_table_open(&ct, f->path, 4, NULL, 0) != 0)
            _exit(1);
        nb_table_lock(&ct);
        cs = nb_table_reserve(&ct, "crashed-writer", 7, 8);
        if (cs == NULL)
            _exit(2);
        snprintf(cs->container_id, sizeof(cs->container_id), "%s", "deadbeef");
        cs->ports[0].sandboxport = 3000;
        cs->ports[0].hostport = 41000;
        nb_table_unlock(&ct);
        _exit(0); /* no close, no msync, no unmap */
    }
    wait_exit_ok(pid);

    open_ok(f, &t, 4);
    nb_table_lock(&t);
    s = nb_table_find(&t, "crashed-writer");
    assert_non_null(s);
    assert_int_equal(s->state, NB_SLOT_CREATING); /* what reconciliation takes over */
    assert_string_equal(s->container_id, "deadbeef");
    assert_int_equal(s->ports[0].sandboxport, 3000);
    assert_int_equal(s->ports[0].hostport, 41000);
    assert_int_equal(s->owner_pid, pid);
    nb_table_unlock(&t);
    nb_table_close(&t);
}

/* ---- foreign or damaged files ---- */

/*
 * Open a file of another layout or a damaged one: it is moved to .old
 * (content untouched, the log saying why) and a fresh table is made in its
 * place, flagged for adoption of the running sandboxes.
 */
static void open_moves_aside(struct fixture *f, uint32_t nslots, const char *why, off_t old_size)
{
    char old[256];
    struct nb_table t;
    const char *log;

    snprintf(old, sizeof(old), "%s.old", f->path);
    capture_begin(f);
    open_ok(f, &t, nslots);
    log = capture_end(f);
    assert_non_null(strstr(log, why));
    assert_non_null(strstr(log, "moved it to"));
    assert_non_null(strstr(log, "adopted"));
    assert_memory_equal(t.hdr->magic, NB_TABLE_MAGIC, 8);
    assert_int_equal(t.hdr->version, NB_TABLE_VERSION);
    assert_int_equal(t.hdr->flags & NB_TABLE_ADOPT_PENDING, NB_TABLE_ADOPT_PENDING);
    assert_int_equal(t.nslots, nslots);
    assert_int_equal(nb_table_count(&t), 0);
    assert_int_equal(file_size(f->path), expected_size(nslots));
    assert_int_equal(file_size(old), old_size);
    reserve_ok(&t, "works");
    nb_table_close(&t);
}

static void write_file_bytes(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
}

static void test_wrong_magic_is_moved_aside(void **state)
{
    struct fixture *f = *state;
    char junk[4096], back[8], old[256];
    int fd;

    memset(junk, 'x', sizeof(junk));
    memcpy(junk, "GARBAGE!", 8);
    write_file_bytes(f->path, junk, sizeof(junk));
    open_moves_aside(f, 4, "bad magic", (off_t)sizeof(junk));
    /* kept as it was */
    snprintf(old, sizeof(old), "%s.old", f->path);
    fd = open(old, O_RDONLY | O_CLOEXEC);
    assert_int_equal(read(fd, back, 8), 8);
    close(fd);
    assert_memory_equal(back, "GARBAGE!", 8);
}

static void test_short_foreign_file_is_moved_aside(void **state)
{
    struct fixture *f = *state;

    write_file_bytes(f->path, "hi\n", 3);
    open_moves_aside(f, 4, "bad magic", 3);
}

static void test_foreign_file_starting_with_zeros_is_not_wiped(void **state)
{
    struct fixture *f = *state;
    char junk[5000], back[5000], old[256];
    int fd;

    memset(junk, 0, sizeof(junk));
    memcpy(junk + 100, "precious", 8);
    write_file_bytes(f->path, junk, sizeof(junk));
    open_moves_aside(f, 4, "bad magic", (off_t)sizeof(junk));
    snprintf(old, sizeof(old), "%s.old", f->path);
    fd = open(old, O_RDONLY | O_CLOEXEC);
    assert_int_equal(read(fd, back, sizeof(back)), (ssize_t)sizeof(back));
    close(fd);
    assert_memory_equal(back, junk, sizeof(junk));
}

static void test_wrong_version_is_moved_aside(void **state)
{
    struct fixture *f = *state;
    uint32_t v = 1;
    struct nb_table t;

    open_ok(f, &t, 4);
    reserve_ok(&t, "of-the-old-layout");
    nb_table_close(&t);
    patch_header(f->path, offsetof(struct nb_table_header, version), &v, sizeof(v));
    open_moves_aside(f, 4, "layout version 1", expected_size(4));
}

static void test_wrong_slot_size_is_moved_aside(void **state)
{
    struct fixture *f = *state;
    uint32_t sz = (uint32_t)sizeof(struct nb_slot) + 8;
    struct nb_table t;

    open_ok(f, &t, 4);
    nb_table_close(&t);
    patch_header(f->path, offsetof(struct nb_table_header, slot_size), &sz, sizeof(sz));
    open_moves_aside(f, 4, "-byte slots", expected_size(4));
}

static void test_truncated_file_is_moved_aside(void **state)
{
    struct fixture *f = *state;
    struct nb_table t;

    open_ok(f, &t, 8);
    nb_table_close(&t);
    assert_int_equal(truncate(f->path, expected_size(3)), 0);
    open_moves_aside(f, 8, "damaged", expected_size(3));
}

/* A second move keeps only the newest .old. */
static void test_only_one_old_copy_is_kept(void **state)
{
    struct fixture *f = *state;
    char old[256];

    write_file_bytes(f->path, "first\n", 6);
    open_moves_aside(f, 4, "bad magic", 6);
    write_file_bytes(f->path, "second!\n", 8);
    open_moves_aside(f, 4, "bad magic", 8);
    snprintf(old, sizeof(old), "%s.old", f->path);
    assert_int_equal(file_size(old), 8);
}

/* While another process has it open (an old nanobox running), it is refused and left. */
static void test_other_layout_held_open_is_refused(void **state)
{
    struct fixture *f = *state;
    uint32_t v = 1;
    struct nb_table t, t2;
    char old[256];
    int fd;

    open_ok(f, &t, 4);
    nb_table_close(&t);
    patch_header(f->path, offsetof(struct nb_table_header, version), &v, sizeof(v));
    fd = open(f->path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_SH), 0);
    assert_int_equal(nb_table_open(&t2, f->path, 4, f->err, sizeof(f->err)), -1);
    assert_non_null(strstr(f->err, "layout version 1"));
    assert_non_null(strstr(f->err, "stop that one first"));
    close(fd);
    snprintf(old, sizeof(old), "%s.old", f->path);
    assert_int_equal(access(old, F_OK), -1);
    assert_int_equal(file_size(f->path), expected_size(4));
}

/* A fresh table is flagged for adoption; an existing one of ours is not re-flagged. */
static void test_fresh_table_is_flagged_for_adoption(void **state)
{
    struct fixture *f = *state;
    struct nb_table t;

    open_ok(f, &t, 4);
    assert_int_equal(t.hdr->flags & NB_TABLE_ADOPT_PENDING, NB_TABLE_ADOPT_PENDING);
    t.hdr->flags &= ~NB_TABLE_ADOPT_PENDING; /* what an adoption pass does */
    nb_table_close(&t);
    open_ok(f, &t, 4);
    assert_int_equal(t.hdr->flags & NB_TABLE_ADOPT_PENDING, 0);
    nb_table_close(&t);
}

/* adopt: FREE -> RUNNING or PAUSED at that index, a new generation; refused elsewhere */
static void test_adopt_takes_the_free_slot_at_its_index(void **state)
{
    struct fixture *f = *state;
    struct nb_slot from, *s;
    struct nb_table t;
    uint32_t gen;

    open_ok(f, &t, 4);
    memset(&from, 0, sizeof(from));
    snprintf(from.id, sizeof(from.id), "adopted");
    snprintf(from.owner, sizeof(from.owner), "alice");
    from.expires = 5000;
    from.state = NB_SLOT_DESTROYING; /* ignored */
    from.owner_pid = 42;             /* ignored */
    nb_table_lock(&t);
    gen = (uint32_t)t.hdr->generation;
    assert_int_equal(nb_table_adopt(&t, 2, &from, NB_SLOT_RUNNING, 1000), 0);
    s = &t.slots[2];
    assert_int_equal(s->state, NB_SLOT_RUNNING);
    assert_int_equal(s->owner_pid, 0);
    assert_int_equal(s->generation, gen + 1);
    assert_int_equal(s->state_since, 1000);
    assert_string_equal(s->owner, "alice");
    assert_int_equal(s->expires, 5000);
    assert_ptr_equal(nb_table_find(&t, "adopted"), s);
    /* taken, out of range, or a state that is not up: refused */
    assert_int_equal(nb_table_adopt(&t, 2, &from, NB_SLOT_RUNNING, 1000), -1);
    assert_int_equal(nb_table_adopt(&t, 4, &from, NB_SLOT_RUNNING, 1000), -1);
    assert_int_equal(nb_table_adopt(&t, 1, &from, NB_SLOT_CREATING, 1000), -1);
    assert_int_equal(t.slots[1].state, NB_SLOT_FREE);
    assert_int_equal(nb_table_adopt(&t, 1, &from, NB_SLOT_PAUSED, 1000), 0);
    assert_int_equal(t.slots[1].state, NB_SLOT_PAUSED);
    nb_table_unlock(&t);
    nb_table_close(&t);
}

static void test_half_created_file_is_created_afresh(void **state)
{
    struct fixture *f = *state;
    struct nb_table_header h;
    struct nb_table t;
    int fd;

    /* What a creator that died before writing the magic leaves behind. */
    memset(&h, 0, sizeof(h));
    h.version = NB_TABLE_VERSION;
    h.nslots = 3;
    fd = open(f->path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, &h, sizeof(h)), (ssize_t)sizeof(h));
    assert_int_equal(ftruncate(fd, expected_size(3)), 0);
    close(fd);

    capture_begin(f);
    open_ok(f, &t, 4);
    assert_non_null(strstr(capture_end(f), "never completely created"));
    assert_memory_equal(t.hdr->magic, NB_TABLE_MAGIC, 8);
    assert_int_equal(t.nslots, 4);
    assert_int_equal(nb_table_count(&t), 0);
    assert_int_equal(file_size(f->path), expected_size(4));
    reserve_ok(&t, "works");
    nb_table_close(&t);
}

/* ---- resizing ---- */

static void test_grow_keeps_slots_and_adds_free_ones(void **state)
{
    struct fixture *f = *state;
    struct nb_table t;

    open_ok(f, &t, 2);
    reserve_ok(&t, "first");
    reserve_ok(&t, "second");
    nb_table_close(&t);

    open_ok(f, &t, 16);
    assert_int_equal(t.nslots, 16);
    assert_int_equal(t.hdr->nslots, 16);
    assert_int_equal(file_size(f->path), expected_size(16));
    nb_table_lock(&t);
    assert_ptr_equal(nb_table_find(&t, "first"), &t.slots[0]);
    assert_ptr_equal(nb_table_find(&t, "second"), &t.slots[1]);
    for (uint32_t i = 2; i < 16; i++)
        assert_int_equal(t.slots[i].state, NB_SLOT_FREE);
    for (int i = 2; i < 16; i++)
        assert_non_null(nb_table_reserve(&t, "more", 1, 2));
    assert_null(nb_table_reserve(&t, "full", 1, 2));
    assert_int_equal(t.hdr->generation, 16);
    nb_table_unlock(&t);
    nb_table_close(&t);
}

static void test_shrink_when_dropped_slots_are_free(void **state)
{
    struct fixture *f = *state;
    struct nb_table t;

    open_ok(f, &t, 16);
    reserve_ok(&t, "a");
    reserve_ok(&t, "b");
    nb_table_close(&t);

    open_ok(f, &t, 4);
    assert_int_equal(t.nslots, 4);
    assert_int_equal(t.hdr->nslots, 4);
    assert_int_equal(file_size(f->path), expected_size(4));
    assert_non_null(nb_table_find(&t, "a"));
    assert_non_null(nb_table_find(&t, "b"));
    assert_int_equal(nb_table_count(&t), 2);
    nb_table_close(&t);
}

static void test_shrink_refused_while_dropped_slot_in_use(void **state)
{
    struct fixture *f = *state;
    struct nb_table t;
    char id[16];
    const char *log;

    open_ok(f, &t, 8);
    nb_table_lock(&t);
    for (int i = 0; i < 6; i++) {
        snprintf(id, sizeof(id), "sb-%d", i);
        assert_non_null(nb_table_reserve(&t, id, 1, 2));
    }
    for (int i = 0; i < 5; i++)
        nb_table_release(&t, &t.slots[i]);
    nb_table_unlock(&t);
    nb_table_close(&t); /* slot 5 still in use */

    capture_begin(f);
    open_ok(f, &t, 4);
    log = capture_end(f);
    assert_non_null(strstr(log, "cannot shrink"));
    assert_non_null(strstr(log, "sb-5"));
    assert_int_equal(t.nslots, 8);
    assert_int_equal(t.hdr->nslots, 8);
    assert_int_equal(file_size(f->path), expected_size(8));
    assert_ptr_equal(nb_table_find(&t, "sb-5"), &t.slots[5]);
    nb_table_release(&t, &t.slots[5]);
    nb_table_close(&t);

    open_ok(f, &t, 4);
    assert_int_equal(t.nslots, 4);
    assert_int_equal(file_size(f->path), expected_size(4));
    nb_table_close(&t);
}

static void test_resize_waits_until_nobody_else_has_it_open(void **state)
{
    struct fixture *f = *state;
    struct nb_table a, b;

    open_ok(f, &a, 4);
    capture_begin(f);
    open_ok(f, &b, 8);
    assert_non_null(strstr(capture_end(f), "open in another process"));
    assert_int_equal(b.nslots, 4);
    assert_int_equal(file_size(f->path), expected_size(4));

    /* both handles see one table */
    reserve_ok(&b, "via-b");
    nb_table_lock(&a);
    assert_non_null(nb_table_find(&a, "via-b"));
    nb_table_unlock(&a);
    nb_table_close(&a);
    nb_table_close(&b);

    open_ok(f, &a, 8);
    assert_int_equal(a.nslots, 8);
    assert_non_null(nb_table_find(&a, "via-b"));
    nb_table_close(&a);
}

/* ---- many processes ---- */

static int hammer(struct nb_table *t, int child)
{
    char id[32];

    for (int i = 0; i < HAMMER_ITERATIONS; i++) {
        struct nb_slot *s, *counter;
        uint64_t v;

        snprintf(id, sizeof(id), "child-%d-%d", child, i);
        nb_table_lock(t); /* aborts, failing the child, if the lock is unusable */
        s = nb_table_reserve(t, id, i, i + 1);
        counter = nb_table_find(t, "counter");
        if (s == NULL || counter == NULL || nb_table_find(t, id) != s)
            return 2;
        /* a read-modify-write that loses updates unless the lock works */
        v = counter->memory;
        if (i % 61 == 0)
            sched_yield();
        counter->memory = v + 1;
        counter->ports[child].expires++;
        nb_table_release(t, s);
        nb_table_unlock(t);
    }
    return 0;
}

static void test_many_processes_keep_exact_counts(void **state)
{
    struct fixture *f = *state;
    pid_t pids[HAMMER_CHILDREN];
    struct nb_table t;
    struct nb_slot *counter;

    open_ok(f, &t, 16);
    reserve_ok(&t, "counter");
    for (int c = 0; c < HAMMER_CHILDREN; c++) {
        pids[c] = fork();
        assert_true(pids[c] >= 0);
        if (pids[c] == 0) {
            struct nb_table own;
            int rc;
            /* half share the parent's mapping, half map the file themselves */
            if (c % 2 == 0)
                _exit(hammer(&t, c));
            if (nb_table_open(&own, f->path, 16, NULL, 0) != 0)
                _exit(3);
            rc = hammer(&own, c);
            nb_table_close(&own);
            _exit(rc);
        }
    }
    for (int c = 0; c < HAMMER_CHILDREN; c++)
        wait_exit_ok(pids[c]);

    nb_table_lock(&t);
    counter = nb_table_find(&t, "counter");
    assert_non_null(counter);
    assert_int_equal(counter->memory, HAMMER_CHILDREN * HAMMER_ITERATIONS);
    for (int c = 0; c < HAMMER_CHILDREN; c++)
        assert_int_equal(counter->ports[c].expires, HAMMER_ITERATIONS);
    assert_int_equal(nb_table_count(&t), 1);
    assert_int_equal(t.hdr->generation, 1 + HAMMER_CHILDREN * HAMMER_ITERATIONS);
    nb_table_unlock(&t);
    nb_table_close(&t);
}

/* A child takes the lock, reserves a slot, then dies one way or another. */
static void die_holding_lock(struct fixture *f, struct nb_table *t, int by_sigkill)
{
    struct nb_slot *s;
    const char *log;
    int p[2], status;
    pid_t pid;
    char c;

    assert_int_equal(pipe(p), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        nb_table_lock(t);
        if (nb_table_reserve(t, "orphan", 1, 2) == NULL)
            _exit(1);
        if (!by_sigkill)
            _exit(0);
        (void)!write(p[1], "x", 1);
        for (;;)
            pause();
    }
    close(p[1]);
    if (by_sigkill) {
        assert_int_equal(read(p[0], &c, 1), 1);
        assert_int_equal(kill(pid, SIGKILL), 0);
    }
    close(p[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (by_sigkill)
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    else
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    capture_begin(f);
    nb_table_lock(t);
    log = capture_end(f);
    assert_non_null(strstr(log, "repaired table lock left by a dead process"));

    /* what the dead process wrote is there, and the table works */
    s = nb_table_find(t, "orphan");
    assert_non_null(s);
    assert_int_equal(s->state, NB_SLOT_CREATING);
    assert_int_equal(s->owner_pid, pid);
    assert_non_null(nb_table_reserve(t, "after", 1, 2));
    assert_int_equal(nb_table_count(t), 2);
    nb_table_release(t, s);
    nb_table_unlock(t);

    /* repaired for good: the next lock is plain */
    capture_begin(f);
    nb_table_lock(t);
    assert_string_equal(capture_end(f), "");
    assert_int_equal(nb_table_count(t), 1);
    nb_table_unlock(t);
}

static void test_lock_repaired_after_holder_killed(void **state)
{
    struct fixture *f = *state;
    struct nb_table t;

    open_ok(f, &t, 4);
    die_holding_lock(f, &t, 1);
    nb_table_close(&t);
}

static void test_lock_repaired_after_holder_exits(void **state)
{
    struct fixture *f = *state;
    struct nb_table t;

    open_ok(f, &t, 4);
    die_holding_lock(f, &t, 0);
    nb_table_close(&t);
}

/*
 * After a power cut the lock word still names a thread that is gone, and no
 * kernel ever marked it dead: only re-initialisation by the first opener
 * helps. Simulated by putting back the bytes of a held lock.
 */
static void test_lock_held_before_a_reboot_is_reset_by_first_opener(void **state)
{
    struct fixture *f = *state;
    pthread_mutex_t *saved;
    struct nb_table t;
    pid_t pid;

    saved = mmap(NULL, sizeof(*saved), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(saved != MAP_FAILED);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct nb_table ct;
        if (nb_table_open(&ct, f->path, 4, NULL, 0) != 0)
            _exit(1);
        nb_table_lock(&ct);
        memcpy(saved, &ct.hdr->lock, sizeof(*saved));
        _exit(0);
    }
    wait_exit_ok(pid);
    patch_header(f->path, offsetof(struct nb_table_header, lock), saved, sizeof(*saved));
    munmap(saved, sizeof(*saved));

    open_ok(f, &t, 4);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(5); /* a lock that never comes back ends here */
        nb_table_lock(&t);
        nb_table_unlock(&t);
        _exit(0);
    }
    wait_exit_ok(pid);
    reserve_ok(&t, "after-reboot");
    nb_table_close(&t);
}

static void test_concurrent_first_open_gives_one_header(void **state)
{
    struct fixture *f = *state;

    for (int round = 0; round < RACE_ROUNDS; round++) {
        pid_t pids[RACE_CHILDREN];
        struct nb_table t;
        int gate[2];
        char id[32];

        snprintf(f->path, sizeof(f->path), "%s/race-%d", f->dir, round);
        assert_int_equal(pipe(gate), 0);
        for (int c = 0; c < RACE_CHILDREN; c++) {
            pids[c] = fork();
            assert_true(pids[c] >= 0);
            if (pids[c] == 0) {
                struct nb_table ct;
                char b;
                close(gate[1]);
                if (read(gate[0], &b, 1) != 0) /* wait for the parent to open the gate */
                    _exit(1);
                if (nb_table_open(&ct, f->path, 32, NULL, 0) != 0)
                    _exit(2);
                snprintf(id, sizeof(id), "racer-%d", c);
                nb_table_lock(&ct);
                if (nb_table_reserve(&ct, id, 1, 2) == NULL)
                    _exit(3);
                nb_table_unlock(&ct);
                nb_table_close(&ct);
                _exit(0);
            }
        }
        close(gate[0]);
        close(gate[1]); /* all children see EOF at once */
        for (int c = 0; c < RACE_CHILDREN; c++)
            wait_exit_ok(pids[c]);

        open_ok(f, &t, 32);
        assert_memory_equal(t.hdr->magic, NB_TABLE_MAGIC, 8);
        assert_int_equal(t.hdr->version, NB_TABLE_VERSION);
        assert_int_equal(t.hdr->slot_size, sizeof(struct nb_slot));
        assert_int_equal(t.hdr->nslots, 32);
        assert_int_equal(file_size(f->path), expected_size(32));
        nb_table_lock(&t);
        assert_int_equal(nb_table_count(&t), RACE_CHILDREN);
        assert_int_equal(t.hdr->generation, RACE_CHILDREN);
        for (int c = 0; c < RACE_CHILDREN; c++) {
            snprintf(id, sizeof(id), "racer-%d", c);
            assert_non_null(nb_table_find(&t, id));
        }
        nb_table_unlock(&t);
        nb_table_close(&t);
    }
}

#define T(test) cmocka_unit_test_setup_teardown(test, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_create_writes_header_file_size_and_mode),
        T(test_open_rejects_zero_slots_and_bad_path),
        T(test_reserve_fills_a_creating_slot),
        T(test_find_matches_whole_id_only),
        T(test_release_frees_slot_and_keeps_generation),
        T(test_full_table_returns_null),
        T(test_generation_skips_zero_on_wrap),
        T(test_commit_makes_a_creating_slot_running_or_pooled),
        T(test_commit_refused_for_another_generation),
        T(test_commit_refused_unless_creating),
        T(test_commit_refused_to_a_state_that_is_not_up),
        T(test_hand_out_turns_a_warm_slot_of_the_image_running),
        T(test_mark_destroying_from_the_state_the_caller_saw),
        T(test_mark_destroying_refused_from_another_state),
        T(test_unmark_destroying_gives_the_sandbox_back),
        T(test_unmark_destroying_refused_unless_destroying_of_that_generation),
        T(test_pause_stops_the_ttl_and_resume_gives_the_rest),
        T(test_pause_of_an_expired_slot_keeps_a_second),
        T(test_pause_refused_unless_running),
        T(test_resume_refused_unless_paused),
        T(test_a_paused_slot_is_destroyed_and_given_back_paused),
        T(test_take_over_an_abandoned_creating_or_destroying_slot),
        T(test_take_over_refused_from_a_settled_state),
        T(test_disown_leaves_the_slot_to_reconciliation),
        T(test_free_only_the_slot_of_that_generation),
        T(test_free_refused_for_a_live_slot),
        T(test_data_survives_close_and_reopen),
        T(test_data_survives_a_crash_without_cleanup),
        T(test_wrong_magic_is_moved_aside),
        T(test_short_foreign_file_is_moved_aside),
        T(test_foreign_file_starting_with_zeros_is_not_wiped),
        T(test_wrong_version_is_moved_aside),
        T(test_wrong_slot_size_is_moved_aside),
        T(test_truncated_file_is_moved_aside),
        T(test_only_one_old_copy_is_kept),
        T(test_other_layout_held_open_is_refused),
        T(test_fresh_table_is_flagged_for_adoption),
        T(test_adopt_takes_the_free_slot_at_its_index),
        T(test_half_created_file_is_created_afresh),
        T(test_grow_keeps_slots_and_adds_free_ones),
        T(test_shrink_when_dropped_slots_are_free),
        T(test_shrink_refused_while_dropped_slot_in_use),
        T(test_resize_waits_until_nobody_else_has_it_open),
        T(test_many_processes_keep_exact_counts),
        T(test_lock_repaired_after_holder_killed),
        T(test_lock_repaired_after_holder_exits),
        T(test_lock_held_before_a_reboot_is_reset_by_first_opener),
        T(test_concurrent_first_open_gives_one_header),
    };

    nb_log_init("test_table", NB_LOG_WARN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
