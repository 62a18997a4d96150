"""The userfaultfd holder (persistence/lazy_holder.go). It keeps a duplicate of each lazy fill's
userfaultfd until that fill's kernel has exited. So the server's exit (a kill -9 mid-fill) never
releases one while its kernel lives: a thread waiting on a page not filled yet keeps waiting until
the kernel, which dies with the server, is gone, and never reads zeros there.

It reads (userfaultfd, pidfd of the kernel) pairs from fd 3, a SOCK_SEQPACKET socket, and exits
once the server has closed its end and every kernel it holds one for has exited. It ignores the
signals a stop or a terminal sends its group: it must outlive the kernels, not race them."""

import os
import select
import signal
import socket


def main():
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    s = socket.socket(fileno=3)
    poll = select.poll()
    poll.register(s, select.POLLIN)
    held = {}  # pidfd -> userfaultfd
    serving = True
    while serving or held:
        for fd, _ in poll.poll():
            if serving and fd == s.fileno():
                try:
                    msg, fds, _, _ = socket.recv_fds(s, 16, 2)
                except OSError:
                    msg, fds = b"", []
                if len(fds) == 2:
                    held[fds[1]] = fds[0]
                    poll.register(fds[1], select.POLLIN)
                    continue
                for x in fds:
                    os.close(x)
                if not msg:  # the server is gone
                    serving = False
                    poll.unregister(s)
                    s.close()
            elif fd in held:  # that kernel exited
                poll.unregister(fd)
                os.close(held.pop(fd))
                os.close(fd)


main()
