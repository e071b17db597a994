/*
 * sudo.h - nanobox-init run under the name "sudo": a small sudo that asks
 * the agent of its sandbox to run a command as root (docs/AGENT-PROTOCOL.md).
 */
#ifndef INIT_SUDO_H
#define INIT_SUDO_H

/* The whole program: returns the exit status. */
int init_sudo_main(int argc, char **argv);

#endif
