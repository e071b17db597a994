/*
 * test_demux.c - Docker's multiplexed stream parser: whatever way libcurl
 * chops the stream, the bytes of each stream come out exact; malformed
 * headers and a callback that says stop end the stream for good.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "demux.h"

#define BIG_FRAME 70000 /* needs more than 16 bits of length */

/* What the callback saw, per stream. */
struct collect {
    struct nb_buf out[3]; /* indexed by enum nb_stream */
    unsigned calls;
    int stop_on_call; /* return -1 on this call (1-based); 0: never */
};

/* A test stream and what it must decode to. */
struct sample {
    struct nb_buf wire;
    struct nb_buf want[3];
    unsigned char *boundary; /* boundary[i]: offset i starts a frame (or is the end) */
};

static void collect_init(struct collect *c)
{
    memset(c, 0, sizeof(*c));
    for (int i = 0; i < 3; i++)
        nb_buf_init(&c->out[i], 1 << 20);
}

static void collect_reset(struct collect *c)
{
    for (int i = 0; i < 3; i++)
        nb_buf_reset(&c->out[i]);
    c->calls = 0;
}

static void collect_free(struct collect *c)
{
    for (int i = 0; i < 3; i++)
        nb_buf_free(&c->out[i]);
}

static int collect_cb(void *arg, enum nb_stream stream, const char *data, size_t len)
{
    struct collect *c = arg;

    c->calls++;
    if (c->stop_on_call && c->calls == (unsigned)c->stop_on_call)
        return -1;
    if ((unsigned)stream > NB_STREAM_STDERR || nb_buf_append(&c->out[stream], data, len) != NB_OK)
        return -1;
    return 0;
}

static void put_header(struct nb_buf *b, unsigned char type, uint32_t len)
{
    unsigned char h[8] = {type,
                          0,
                          0,
                          0,
                          (unsigned char)(len >> 24),
                          (unsigned char)(len >> 16),
                          (unsigned char)(len >> 8),
                          (unsigned char)len};

    assert_int_equal(nb_buf_append(b, h, sizeof(h)), NB_OK);
}

static void add_frame(struct sample *s, enum nb_stream stream, const char *data, uint32_t len)
{
    size_t start = s->wire.len;

    put_header(&s->wire, (unsigned char)stream, len);
    assert_int_equal(nb_buf_append(&s->wire, data, len), NB_OK);
    assert_int_equal(nb_buf_append(&s->want[stream], data, len), NB_OK);
    /* inside the frame: no boundary; right after it: one */
    s->boundary = realloc(s->boundary, s->wire.len + 1);
    assert_non_null(s->boundary);
    memset(s->boundary + start + 1, 0, s->wire.len - start - 1);
    s->boundary[s->wire.len] = 1;
}

/*
 * stdout, stderr, an empty frame, a 70000-byte frame with every byte value,
 * a stdin frame, more of each.
 */
static void sample_build(struct sample *s)
{
    char *big = malloc(BIG_FRAME);

    assert_non_null(big);
    for (size_t i = 0; i < BIG_FRAME; i++)
        big[i] = (char)(i * 7 + i / 251);
    memset(s, 0, sizeof(*s));
    nb_buf_init(&s->wire, 1 << 20);
    for (int i = 0; i < 3; i++)
        nb_buf_init(&s->want[i], 1 << 20);
    s->boundary = calloc(1, 1);
    assert_non_null(s->boundary);
    s->boundary[0] = 1;

    add_frame(s, NB_STREAM_STDOUT, "hello, ", 7);
    add_frame(s, NB_STREAM_STDERR, "warning: disk\n", 14);
    add_frame(s, NB_STREAM_STDOUT, "", 0);
    add_frame(s, NB_STREAM_STDOUT, big, BIG_FRAME);
    add_frame(s, NB_STREAM_STDERR, "", 0);
    add_frame(s, NB_STREAM_STDIN, "in", 2);
    add_frame(s, NB_STREAM_STDERR, "bye\n", 4);
    add_frame(s, NB_STREAM_STDOUT, "\0end", 4);
    free(big);
}

static void sample_free(struct sample *s)
{
    nb_buf_free(&s->wire);
    for (int i = 0; i < 3; i++)
        nb_buf_free(&s->want[i]);
    free(s->boundary);
    s->boundary = NULL;
}

static void assert_collected(const struct collect *c, const struct sample *s)
{
    for (int i = 0; i < 3; i++) {
        assert_int_equal(c->out[i].len, s->want[i].len);
        /* memcmp first: cmocka's own compare goes byte by byte */
        if (s->want[i].len && memcmp(c->out[i].data, s->want[i].data, s->want[i].len) != 0)
            assert_memory_equal(c->out[i].data, s->want[i].data, s->want[i].len);
    }
}

static int setup(void **state)
{
    struct sample *s = malloc(sizeof(*s));

    if (s == NULL)
        return -1;
    sample_build(s);
    *state = s;
    return 0;
}

static int teardown(void **state)
{
    struct sample *s = *state;

    sample_free(s);
    free(s);
    return 0;
}

/* ---- any chunking gives the same bytes ---- */

static void test_whole_stream_in_one_chunk(void **state)
{
    struct sample *s = *state;
    struct collect c;
    struct nb_demux d;

    collect_init(&c);
    nb_demux_init(&d, collect_cb, &c);
    assert_int_equal(nb_demux_feed(&d, s->wire.data, s->wire.len), 0);
    assert_true(nb_demux_at_boundary(&d));
    assert_collected(&c, s);
    assert_int_equal(s->want[NB_STREAM_STDOUT].len, 7 + BIG_FRAME + 4);
    assert_int_equal(s->want[NB_STREAM_STDERR].len, 14 + 4);
    collect_free(&c);
}

static void test_stream_split_in_two_at_every_offset(void **state)
{
    struct sample *s = *state;
    struct collect c;
    struct nb_demux d;

    collect_init(&c);
    for (size_t cut = 0; cut <= s->wire.len; cut++) {
        collect_reset(&c);
        nb_demux_init(&d, collect_cb, &c);
        assert_int_equal(nb_demux_feed(&d, s->wire.data, cut), 0);
        assert_int_equal(nb_demux_at_boundary(&d), s->boundary[cut]);
        assert_int_equal(nb_demux_feed(&d, s->wire.data + cut, s->wire.len - cut), 0);
        assert_true(nb_demux_at_boundary(&d));
        assert_collected(&c, s);
    }
    collect_free(&c);
}

static void test_stream_one_byte_at_a_time(void **state)
{
    struct sample *s = *state;
    struct collect c;
    struct nb_demux d;

    collect_init(&c);
    nb_demux_init(&d, collect_cb, &c);
    assert_true(nb_demux_at_boundary(&d));
    for (size_t i = 0; i < s->wire.len; i++) {
        assert_int_equal(nb_demux_feed(&d, s->wire.data + i, 1), 0);
        /* true exactly at frame boundaries, never mid-header or mid-payload */
        assert_int_equal(nb_demux_at_boundary(&d), s->boundary[i + 1]);
    }
    assert_collected(&c, s);
    collect_free(&c);
}

static void test_empty_feed_changes_nothing(void **state)
{
    struct sample *s = *state;
    struct collect c;
    struct nb_demux d;

    collect_init(&c);
    nb_demux_init(&d, collect_cb, &c);
    assert_int_equal(nb_demux_feed(&d, s->wire.data, 0), 0);
    assert_int_equal(nb_demux_feed(&d, s->wire.data, 3), 0);
    assert_int_equal(nb_demux_feed(&d, s->wire.data + 3, 0), 0);
    assert_false(nb_demux_at_boundary(&d));
    assert_int_equal(nb_demux_feed(&d, s->wire.data + 3, s->wire.len - 3), 0);
    assert_true(nb_demux_at_boundary(&d));
    assert_collected(&c, s);
    collect_free(&c);
}

/* ---- malformed streams ---- */

/* A good frame, then hdr (8 bytes), then another good frame. */
static void expect_malformed(const unsigned char bad[8])
{
    struct collect c;
    struct nb_demux d;
    struct nb_buf wire;

    collect_init(&c);
    nb_buf_init(&wire, 1024);
    put_header(&wire, NB_STREAM_STDOUT, 2);
    assert_int_equal(nb_buf_append(&wire, "ok", 2), NB_OK);
    assert_int_equal(nb_buf_append(&wire, bad, 8), NB_OK);
    assert_int_equal(nb_buf_append(&wire, "payload!", 8), NB_OK);

    nb_demux_init(&d, collect_cb, &c);
    /* split inside the bad header: its first half is not yet an error */
    assert_int_equal(nb_demux_feed(&d, wire.data, 10 + 3), 0);
    assert_int_equal(nb_demux_feed(&d, wire.data + 13, wire.len - 13), -1);
    assert_false(nb_demux_at_boundary(&d));
    assert_int_equal(c.out[NB_STREAM_STDOUT].len, 2);
    assert_int_equal(c.calls, 1);

    /* sticky: a perfectly good frame after it is refused, unseen */
    nb_buf_reset(&wire);
    put_header(&wire, NB_STREAM_STDOUT, 3);
    assert_int_equal(nb_buf_append(&wire, "abc", 3), NB_OK);
    assert_int_equal(nb_demux_feed(&d, wire.data, wire.len), -1);
    assert_int_equal(nb_demux_feed(&d, wire.data, 0), -1);
    assert_int_equal(c.calls, 1);
    assert_false(nb_demux_at_boundary(&d));
    nb_buf_free(&wire);
    collect_free(&c);
}

static void test_unknown_frame_type_is_an_error(void **state)
{
    static const unsigned char type3[8] = {3, 0, 0, 0, 0, 0, 0, 8};
    static const unsigned char type255[8] = {0xff, 0, 0, 0, 0, 0, 0, 8};

    (void)state;
    expect_malformed(type3);
    expect_malformed(type255);
}

static void test_nonzero_padding_is_an_error(void **state)
{
    static const unsigned char pad1[8] = {1, 1, 0, 0, 0, 0, 0, 8};
    static const unsigned char pad2[8] = {2, 0, 0x80, 0, 0, 0, 0, 8};
    static const unsigned char pad3[8] = {1, 0, 0, 0xff, 0, 0, 0, 8};

    (void)state;
    expect_malformed(pad1);
    expect_malformed(pad2);
    expect_malformed(pad3);
}

static void test_malformed_first_header_delivers_nothing(void **state)
{
    static const unsigned char bad[8] = {3, 0, 0, 0, 0, 0, 0, 0};
    struct collect c;
    struct nb_demux d;

    (void)state;
    collect_init(&c);
    nb_demux_init(&d, collect_cb, &c);
    assert_int_equal(nb_demux_feed(&d, (const char *)bad, sizeof(bad)), -1);
    assert_int_equal(c.calls, 0);
    assert_int_equal(nb_demux_feed(&d, (const char *)bad, 1), -1);
    collect_free(&c);
}

/* ---- the callback says stop ---- */

static void test_callback_returning_minus_one_stops(void **state)
{
    struct sample *s = *state;
    struct collect c;
    struct nb_demux d;

    collect_init(&c);
    c.stop_on_call = 2; /* the stderr frame */
    nb_demux_init(&d, collect_cb, &c);
    assert_int_equal(nb_demux_feed(&d, s->wire.data, s->wire.len), -1);
    assert_int_equal(c.calls, 2);
    assert_int_equal(c.out[NB_STREAM_STDOUT].len, 7);
    assert_memory_equal(c.out[NB_STREAM_STDOUT].data, "hello, ", 7);
    assert_int_equal(c.out[NB_STREAM_STDERR].len, 0);
    assert_false(nb_demux_at_boundary(&d));

    /* and stays stopped, whatever comes next */
    assert_int_equal(nb_demux_feed(&d, s->wire.data, s->wire.len), -1);
    assert_int_equal(c.calls, 2);
    assert_int_equal(c.out[NB_STREAM_STDOUT].len, 7);
    collect_free(&c);
}

static void test_callback_stop_in_the_middle_of_a_chunked_frame(void **state)
{
    struct sample *s = *state;
    struct collect c;
    struct nb_demux d;
    size_t i;

    collect_init(&c);
    c.stop_on_call = 100; /* inside the big frame (fed bytewise, one call a byte) */
    nb_demux_init(&d, collect_cb, &c);
    for (i = 0; i < s->wire.len; i++)
        if (nb_demux_feed(&d, s->wire.data + i, 1) != 0)
            break;
    assert_true(i < s->wire.len);
    assert_int_equal(c.calls, 100);
    assert_int_equal(nb_demux_feed(&d, s->wire.data + i + 1, 1), -1);
    assert_int_equal(c.calls, 100);
    collect_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_whole_stream_in_one_chunk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stream_split_in_two_at_every_offset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stream_one_byte_at_a_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_feed_changes_nothing, setup, teardown),
        cmocka_unit_test(test_unknown_frame_type_is_an_error),
        cmocka_unit_test(test_nonzero_padding_is_an_error),
        cmocka_unit_test(test_malformed_first_header_delivers_nothing),
        cmocka_unit_test_setup_teardown(test_callback_returning_minus_one_stops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_callback_stop_in_the_middle_of_a_chunked_frame, setup,
                                        teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
