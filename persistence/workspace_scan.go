package persistence

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"time"

	"github.com/carryover/carryover"
	"golang.org/x/sys/unix"
)

// scanWorkspace lists the files to save under root in lexical order (each directory's names
// sorted, a directory's files where its name falls, as fs.WalkDir visits them) and the ones it
// skips, applying the limits: the total budget is spent in walk order, so which files fit is
// deterministic. Each entry is stat'ed relative to its directory's descriptor (one name to look up,
// never a path): a turn scans the whole workspace, and with 10,000 files fs.WalkDir's per-path
// stats and entry sorting were most of a turn's time.
func scanWorkspace(root *os.Root, lim FileLimits) ([]fileCandidate, []carryover.FileSkip, error) {
	s := &wsScan{root: root, lim: lim, skipped: []carryover.FileSkip{}}
	top, err := root.Open(".")
	if err != nil {
		return nil, nil, err
	}
	if err := s.dir(top, ""); err != nil {
		return nil, nil, err
	}
	return s.cands, s.skipped, nil
}

// wsScan is one scan's state: what it found so far and the bytes the files it keeps add up to.
type wsScan struct {
	root    *os.Root
	lim     FileLimits
	cands   []fileCandidate
	skipped []carryover.FileSkip
	total   int64
}

func (s *wsScan) skip(rel, reason string) {
	s.skipped = append(s.skipped, carryover.FileSkip{Path: rel, Reason: reason})
}

// dir scans the open directory f, rel from the root ("" for the root itself), and closes it. Only
// the root's listing failing fails the scan; a subdirectory's is a skip.
func (s *wsScan) dir(f *os.File, rel string) error {
	names, err := f.Readdirnames(-1)
	fd := int(f.Fd())
	defer f.Close()
	if err != nil {
		if rel == "" {
			return err
		}
		s.skip(rel, "unreadable: "+err.Error())
		return nil
	}
	slices.Sort(names)
	for _, name := range names {
		p := path.Join(rel, name)
		if isHidden(name) && !s.lim.SaveHidden && p != PackagesDir {
			s.skip(p, SkipHidden)
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			s.skip(p, "unreadable: "+(&fs.PathError{Op: "lstat", Path: p, Err: err}).Error())
			continue
		}
		if err := s.entry(p, &st); err != nil {
			return err
		}
	}
	return nil
}

// entry takes one directory entry p whose lstat is st: a directory is scanned (through the root,
// which refuses a path that escapes it), a regular file kept within the limits, anything else
// skipped with its reason.
func (s *wsScan) entry(p string, st *unix.Stat_t) error {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		s.skip(p, SkipSymlink)
	case unix.S_IFDIR:
		sub, err := s.root.Open(p)
		if err != nil {
			s.skip(p, "unreadable: "+err.Error())
			return nil
		}
		return s.dir(sub, p)
	case unix.S_IFREG:
		s.file(p, st)
	default:
		s.skip(p, "special file ("+specialType(st.Mode).String()+")")
	}
	return nil
}

// file keeps regular file p unless it is over a limit.
func (s *wsScan) file(p string, st *unix.Stat_t) {
	size := st.Size
	if s.lim.MaxFileBytes > 0 && size > s.lim.MaxFileBytes {
		s.skip(p, fmt.Sprintf("larger than persistence.max_file_bytes (%d)", s.lim.MaxFileBytes))
		return
	}
	if s.lim.MaxTotalBytes > 0 && s.total+size > s.lim.MaxTotalBytes {
		s.skip(p, fmt.Sprintf("workspace over persistence.max_workspace_bytes (%d)", s.lim.MaxTotalBytes))
		return
	}
	s.total += size
	s.cands = append(s.cands, fileCandidate{rel: p, size: size,
		mtime: time.Unix(st.Mtim.Sec, st.Mtim.Nsec).UTC(), mode: st.Mode & 0o777})
}

// specialType is the fs.FileMode type of a special file's st_mode, as fs.DirEntry.Type gives it.
func specialType(mode uint32) fs.FileMode {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	}
	return fs.ModeIrregular
}
