package doctor

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"golang.org/x/sys/unix"

	"github.com/carryover/carryover/kernel/sandbox"
	"github.com/carryover/carryover/persistence/s3"
)

const disableSandbox = "or set sandbox.enabled=false to run kernels as plain processes (no isolation)"

// sandboxChecks: root, bubblewrap, the namespaces, idmapped mounts, cgroups and seccomp; each one
// a failure New would fall back on (or weaken the boxes for), skipped when the sandbox is off.
func sandboxChecks(o Options) Report {
	names := []string{"root", "bubblewrap", "user namespaces", "network namespaces", "idmapped mounts", "cgroups", "seccomp"}
	if !o.Sandbox {
		var r Report
		for _, n := range names {
			r = append(r, Check{Name: n, Status: Skip, Detail: "sandbox.enabled=false"})
		}
		return r
	}
	var r Report
	root := os.Geteuid() == 0
	if root {
		r = append(r, Check{Name: "root", Status: Pass, Detail: "running as uid 0"})
	} else {
		r = append(r, Check{Name: "root", Status: Fail, Detail: fmt.Sprintf("running as uid %d: per-session uids and workspace mounts need root", os.Geteuid()),
			Fix: "run carryover as root (deploy/carryover.service does), " + disableSandbox})
	}
	bw := Check{Name: "bubblewrap"}
	if path, ver, err := sandbox.BwrapVersion(o.Bwrap); err != nil {
		bw.Status, bw.Detail = Fail, fmt.Sprintf("sandbox.bwrap=%q: %v", o.Bwrap, err)
		bw.Fix = "apt-get install bubblewrap (>= " + sandbox.MinBwrapVersion + ") or set sandbox.bwrap to its path, " + disableSandbox
	} else if err := sandbox.Probe(path); err != nil {
		bw.Status, bw.Detail = Fail, fmt.Sprintf("%s %s does not run a box: %v", path, ver, err)
		bw.Fix = "bubblewrap needs the namespaces below; in a container, run it privileged (see deploy/kubernetes), " + disableSandbox
	} else {
		bw.Status, bw.Detail = Pass, fmt.Sprintf("%s, version %s", path, ver)
	}
	r = append(r, bw)
	r = append(r, nsCheck("user namespaces", syscall.CLONE_NEWUSER,
		"sysctl -w user.max_user_namespaces=15000 (and kernel.unprivileged_userns_clone=1 on kernels that have it)"))
	r = append(r, nsCheck("network namespaces", syscall.CLONE_NEWNET,
		"run carryover with CAP_SYS_ADMIN in the host's namespaces (a privileged container); sessions without network need their own"))
	r = append(r, idmapCheck(o, root))
	r = append(r, cgroupCheck())
	sc := Check{Name: "seccomp"}
	if bw.Status != Pass {
		sc.Status, sc.Detail = Skip, "needs bubblewrap"
	} else if err := sandbox.ProbeSeccomp(o.Bwrap); err != nil {
		sc.Status, sc.Detail = Fail, err.Error()
		sc.Fix = "a kernel built with CONFIG_SECCOMP_FILTER, and no container profile that forbids loading a filter (seccompProfile: Unconfined)"
	} else {
		sc.Status, sc.Detail = Pass, "bubblewrap loads the boxes' system-call filter"
	}
	r = append(r, sc)
	return r
}

func nsCheck(name string, flag uintptr, fix string) Check {
	if err := sandbox.ProbeNamespaces(flag); err != nil {
		return Check{Name: name, Status: Fail, Detail: err.Error(), Fix: fix}
	}
	return Check{Name: name, Status: Pass, Detail: "a process can be started in a new one"}
}

func idmapCheck(o Options, root bool) Check {
	c := Check{Name: "idmapped mounts"}
	if !root {
		c.Status, c.Detail = Skip, "needs root"
		return c
	}
	dir := o.DataDir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		c.Status, c.Detail, c.Fix = Fail, err.Error(), "make data_dir a writable directory"
		return c
	}
	uid := o.UIDBase
	if uid <= 0 {
		uid = 200000
	}
	fs := fsType(dir)
	if err := sandbox.ProbeIDMapped(dir, uid); err != nil {
		c.Status, c.Detail = Warn, fmt.Sprintf("%s (%s): %v: boxes run as uid 0 without capabilities instead of a uid of their own", dir, fs, err)
		c.Fix = "put data_dir on a filesystem with idmapped mounts (ext4, xfs, btrfs, tmpfs on Linux >= 5.12-6.3; not overlayfs before 6.8 or NFS)"
		return c
	}
	c.Status, c.Detail = Pass, fmt.Sprintf("%s (%s)", dir, fs)
	return c
}

func cgroupCheck() Check {
	c := Check{Name: "cgroups"}
	h, err := sandbox.ProbeCgroups()
	switch {
	case err != nil:
		c.Status, c.Detail = Warn, err.Error()+": memory falls back to RLIMIT_AS, processes to RLIMIT_NPROC, no CPU limit"
	case len(h.Controllers) < 3 || !h.Writable:
		c.Status = Warn
		c.Detail = fmt.Sprintf("%s at %s: controllers %s, writable %v: the limits of the missing ones fall back to rlimits", h.Version, h.Dir, strings.Join(h.Controllers, ","), h.Writable)
	default:
		c.Status, c.Detail = Pass, fmt.Sprintf("%s at %s: %s", h.Version, h.Dir, strings.Join(h.Controllers, ","))
		return c
	}
	c.Fix = "delegate memory, pids and cpu to carryover's cgroup (systemd: Delegate=yes, as deploy/carryover.service; a container: a writable cgroup v2 mount)"
	return c
}

func checkDirtyPages(o Options) Check {
	c := Check{Name: "userfaultfd + PAGEMAP_SCAN"}
	fix := "Linux >= 6.7 with CONFIG_USERFAULTFD; vm.unprivileged_userfaultfd may stay 0 (user-mode only is used)"
	fd, err := probeUserfaultfd()
	if err != nil {
		c.Status, c.Detail, c.Fix = Warn, err.Error()+": checkpoints hash large buffers instead of tracking dirty pages", fix
		return c
	}
	defer unix.Close(fd)
	if err := probePagemapScan(fd); err != nil {
		c.Status, c.Detail, c.Fix = Warn, err.Error()+": checkpoints hash large buffers instead of tracking dirty pages", fix
		return c
	}
	c.Status, c.Detail = Pass, "user-mode async write-protect, dirty pages found by PAGEMAP_SCAN"
	return c
}

func checkLazyRestore(o Options) Check {
	c := Check{Name: "lazy restore"}
	if !o.LazyRestore {
		c.Status, c.Detail = Skip, "persistence.lazy_restore is off"
		return c
	}
	if err := probeLazyRestore(); err != nil {
		c.Status, c.Detail, c.Fix = Warn, err.Error()+": a wake reads every buffer before the run starts", uffdDeviceFixAccess
		return c
	}
	c.Status, c.Detail = Pass, "/dev/userfaultfd: large buffers are filled in the background on a wake"
	return c
}

func checkDevShm() Check {
	c := Check{Name: "/dev/shm"}
	var st unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &st); err != nil {
		c.Status, c.Detail, c.Fix = Warn, err.Error(), "mount a tmpfs on /dev/shm (multiprocessing and the Jupyter kernels' libraries use it)"
		return c
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	if st.Type != unix.TMPFS_MAGIC || unix.Access("/dev/shm", unix.W_OK) != nil {
		c.Status, c.Detail, c.Fix = Warn, "not a writable tmpfs", "mount a tmpfs on /dev/shm"
		return c
	}
	c.Status, c.Detail = Pass, fmt.Sprintf("tmpfs, %s free", bytesText(free))
	return c
}

func checkDisk(o Options) Check {
	c := Check{Name: "disk space"}
	sp, err := DataDirSpace(o.DataDir, o.MinFreeBytes)
	if err != nil {
		c.Status, c.Detail, c.Fix = Fail, err.Error(), "make data_dir a writable directory"
		return c
	}
	c.Detail = fmt.Sprintf("%s free of %s on %s's filesystem (%s)", bytesText(sp.FreeBytes), bytesText(sp.TotalBytes), o.DataDir, fsType(nearestDir(o.DataDir)))
	switch sp.Level {
	case "fail":
		c.Status, c.Fix = Fail, fmt.Sprintf("free at least %s under data_dir (checkpoints and workspaces live there)", bytesText(o.MinFreeBytes))
	case "warn":
		c.Status, c.Fix = Warn, "free space under data_dir before it fills: a full data dir fails every checkpoint"
	default:
		c.Status = Pass
	}
	return c
}

func checkPython(ctx context.Context, o Options) Check {
	c := Check{Name: "python + ipykernel"}
	py := o.Python
	if py == "" {
		py = "/usr/bin/python3"
	}
	out, err := exec.CommandContext(ctx, py, "-c", "import ipykernel, sys; print(sys.version.split()[0], ipykernel.__version__)").CombinedOutput()
	if err != nil {
		c.Status, c.Detail = Fail, fmt.Sprintf("kernel.python=%q: %v: %s", py, err, lastLine(string(out)))
		c.Fix = "apt-get install python3-ipykernel, or point kernel.python at an interpreter that has ipykernel"
		return c
	}
	f := strings.Fields(string(out))
	c.Status, c.Detail = Pass, fmt.Sprintf("%s: Python %s, ipykernel %s", py, f[0], f[len(f)-1])
	return c
}

func checkPostgres(ctx context.Context, o Options) Check {
	c := Check{Name: "postgresql"}
	if o.PostgresDSN == "" {
		c.Status, c.Detail = Skip, "store.driver is sqlite"
		return c
	}
	ctx, cancel := context.WithTimeout(ctx, o.ReachTimeout)
	defer cancel()
	db, err := sql.Open("pgx", o.PostgresDSN)
	if err == nil {
		defer db.Close()
		var v string
		if err = db.QueryRowContext(ctx, "SHOW server_version").Scan(&v); err == nil {
			c.Status, c.Detail = Pass, "reachable, PostgreSQL "+v
			return c
		}
	}
	c.Status, c.Detail = Fail, err.Error()
	c.Fix = "check store.dsn (host, port, user, password, database) and that PostgreSQL accepts this host (pg_hba.conf)"
	return c
}

func checkS3(ctx context.Context, o Options) Check {
	c := Check{Name: "s3"}
	if o.S3 == nil || o.S3.Bucket == "" {
		c.Status, c.Detail = Skip, "chunks.s3.bucket is empty"
		return c
	}
	ctx, cancel := context.WithTimeout(ctx, o.ReachTimeout)
	defer cancel()
	b, err := s3.Open(ctx, s3.Options{Endpoint: o.S3.Endpoint, Bucket: o.S3.Bucket, Region: o.S3.Region, AccessKey: o.S3.AccessKey,
		SecretKey: o.S3.SecretKey, PathStyle: o.S3.PathStyle, Timeout: o.ReachTimeout})
	if err == nil {
		_, err = b.Exists(ctx, "carryover-doctor-probe")
	}
	if err != nil {
		c.Status, c.Detail = Fail, err.Error()
		c.Fix = "check chunks.s3 (endpoint, bucket, keys, path_style) and that the store is reachable from this host"
		return c
	}
	c.Status, c.Detail = Pass, fmt.Sprintf("bucket %s reachable", o.S3.Bucket)
	return c
}

func fsType(dir string) string {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return "unknown filesystem"
	}
	switch st.Type {
	case unix.EXT4_SUPER_MAGIC:
		return "ext4"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlayfs"
	case unix.NFS_SUPER_MAGIC:
		return "nfs"
	}
	return fmt.Sprintf("filesystem type %#x", st.Type)
}

func bytesText(n int64) string {
	const gi = 1 << 30
	if n >= gi {
		return fmt.Sprintf("%.1f GiB", float64(n)/gi)
	}
	return fmt.Sprintf("%d MiB", n>>20)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
