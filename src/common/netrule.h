/*
 * netrule.h - one egress rule: an IPv4 network and, optionally, a port
 * ("10.1.2.0/24", "192.0.2.7:443", "0.0.0.0/0"). The operator's lists
 * (config egress_allow, egress_deny, egress_widen) and a request's network
 * policy are parsed here, one way, and compared here (is a rule inside
 * another, do two meet) so that what a request may open is judged on the
 * same numbers the kernel rules are written from. Pure functions.
 *
 * Only IPv4 addresses: sandboxes get no IPv6 (see docs/SECURITY.md), and
 * domain names are refused, because a name cannot be enforced honestly at
 * the packet level (see the same page).
 */
#ifndef NB_NETRULE_H
#define NB_NETRULE_H

#include <stddef.h>
#include <stdint.h>

/* Rules in one list (a request's allow or deny, or one config key). */
#define NB_NETRULES_MAX 64
/* Longest text of one rule: "255.255.255.255/32:65535". */
#define NB_NETRULE_TEXT 32

struct nb_netrule {
    uint32_t addr;  /* network address, host byte order, no host bits */
    uint8_t prefix; /* 0..32 */
    uint16_t port;  /* TCP and UDP destination port; 0: every port and protocol */
};

struct nb_netrules {
    unsigned n;
    struct nb_netrule r[NB_NETRULES_MAX];
};

/* Parse one rule; -1 with a message a client can act on. */
int nb_netrule_parse(const char *s, struct nb_netrule *out, char *err, size_t errlen);

/* Append a parsed rule; -1 with a message when the list is full. */
int nb_netrules_add(struct nb_netrules *l, const char *s, char *err, size_t errlen);

/* Parse a config value: rules separated by spaces or commas (may be empty). */
int nb_netrules_parse_list(const char *text, struct nb_netrules *out, char *err, size_t errlen);

/* Is every destination of a also one of outer's? */
int nb_netrule_within(const struct nb_netrule *a, const struct nb_netrule *outer);

/* Is some destination in both? */
int nb_netrule_overlaps(const struct nb_netrule *a, const struct nb_netrule *b);

/* Canonical text: "a.b.c.d/n" plus ":port" when there is one. */
void nb_netrule_format(const struct nb_netrule *r, char *buf, size_t len);

/* The mask of a prefix length, host byte order. */
uint32_t nb_netrule_mask(unsigned prefix);

#endif
