// Package template makes kernels by forking a warm template instead of starting Python from
// scratch (a fork server in the style of Android's zygote or multiprocessing's forkserver).
//
// A template is one Python process per interpreter (the kernelspec's argv[0]) and pre-import set
// (persistence.pre_import): it imports ipykernel, the snapshot agent's dependencies and the
// pre-import set once, has the preload's carryover_warm do its work over them (the agent's index of
// the modules' objects, which a child would otherwise make by touching every module object's
// page), freezes them out of the garbage collector's reach (gc.freeze, so refcount and GC writes
// in a child do not unshare their pages), and then forks a child per kernel asked for. The child builds its own kernel app (ZMQ context and sockets, threads, connection file,
// IPython shell) after the fork, gets the environment, cwd and log the launch asks for, and
// reseeds numpy's legacy global RandomState from the OS (Python's random reseeds itself at fork).
// template.py says the protocol and each step.
//
// Provisioner is a kernel.Provisioner wrapping the local one: kernels whose argv is
// `python -m ipykernel_launcher ...` come from the template; every other launch (another argv, a
// session whose env sets variables libraries read at import, a template that cannot start) and
// every exec command goes to the local provisioner, as before: a forked child then runs with the
// server's privileges, exactly as a local kernel does. For sandboxed kernels, kernel/sandbox makes
// each kernel's box and asks ForkBoxed for the kernel inside it (box.py: the child joins the box's
// cgroups, rlimits and namespaces and drops every privilege before the kernel app starts).
//
// The children are the template's children, not the server's: their exits come from a pidfd
// each (exitwatch.go), their exit status from the template's reports. A child lives on if the
// template dies (kill -9 included): a new template starts and only later kernels come from it. A
// child dies with the server (a pidfd of the server, watched inside the child).
package template
