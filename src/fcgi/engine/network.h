/*
 * network.h - the bridge sandboxes' network: nanobox's own Docker network
 * and the kernel rules that keep a sandbox on it to outbound traffic, under
 * an egress policy of its own.
 *
 * A sandbox asks for network "bridge"; it then sits on the Docker network
 * bridge_network (Linux bridge bridge_interface, inter-container traffic
 * off), at the address its table slot gives it (nb_network_addr), and the
 * filter table holds, for that bridge:
 *
 *   DOCKER-USER  -i IF -j NBF-IF      forwarded traffic from the sandboxes
 *   INPUT        -i IF -j NBI-IF      traffic to any address of the host
 *   NBF-IF   to another sandbox, to 169.254.0.0/16: REJECT; else -g NBS-IF
 *   NBS-IF   -s <sandbox address> -g NBX-<id> per sandbox; else REJECT
 *   NBX-<id> the sandbox's policy: RETURN (on to Docker's rules) or REJECT
 *   NBI-IF   REJECT everything
 *
 * (and ip6tables drops everything from IF: the network has no IPv6).
 * The rules are nanobox-fcgi's: it installs them at start and checks them
 * on every reconciliation (idempotent), installs a sandbox's chain before
 * its container exists and removes it when the sandbox goes; down.sh
 * --purge removes them with the network.
 */
#ifndef NB_NETWORK_H
#define NB_NETWORK_H

#include <stddef.h>
#include <stdint.h>

#include "app.h"
#include "netrule.h"

/* A request's egress policy: its allow rules beat its deny rules. */
struct nb_net_policy {
    struct nb_netrules allow;
    struct nb_netrules deny;
};

/*
 * Make sure the Docker network and the base rules exist (creating what is
 * missing, and nothing twice); 503 network_unavailable when they cannot be.
 */
int nb_network_ensure(struct nb_app *a, struct nb_apierr *ae);

/*
 * The builds' network (template_network = bridge; templates.c): Docker
 * network <bridge_network>-build on Linux bridge <bridge_interface, its
 * first 14 characters>b, subnet template_subnet, made if missing; its name
 * into net. Its rules are a bridge sandbox's with the operator's egress
 * lists and no request's: NBF-<if> rejects the bridge itself, 169.254.0.0/16
 * and the sandboxes' subnet, then egress_allow/egress_deny; NBI-<if>
 * rejects everything to the host; IPv6 dropped. Installed (or repaired) on
 * each call: the reaper's before it starts a build, at most 10 s apart
 * (templates.c). 503 network_unavailable.
 */
int nb_network_build_ensure(struct nb_app *a, char *net, size_t netlen, struct nb_apierr *ae);

/* The address of slot number slot on the bridge network, as text. */
void nb_network_addr(const struct nb_conf *c, uint32_t slot, char *buf, size_t len);

/*
 * May a request ask for p? Every allow rule must lie inside egress_widen,
 * or meet neither egress_deny nor what is never reachable (the sandbox
 * network, 169.254.0.0/16); 403 forbidden naming the rule otherwise.
 */
int nb_network_policy_check(const struct nb_conf *c, const struct nb_net_policy *p,
                            struct nb_apierr *ae);

/*
 * Install (or replace, atomically) sandbox id's chain for policy p, its
 * address being slot's. Before the container exists on create.
 */
int nb_network_apply(struct nb_app *a, const char *id, uint32_t slot, const struct nb_net_policy *p,
                     struct nb_apierr *ae);

/* Change the policy of the live bridge sandbox id (404, 409 if not bridge). */
int nb_network_set_policy(struct nb_app *a, const char *id, const struct nb_net_policy *p,
                          struct nb_apierr *ae);

/* Remove sandbox id's chain and its jump; 0 also when there were none. */
int nb_network_remove(struct nb_app *a, const char *id);

/*
 * Remove every sandbox chain of this bridge whose sandbox has no slot (any
 * state but free); returns how many. The reaper's sweep: whatever path a
 * sandbox left by, its rules go within one reconciliation.
 */
int nb_network_reconcile(struct nb_app *a);

#endif
