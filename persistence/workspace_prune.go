package persistence

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
)

// pruneWorkspace removes the saved-kind files under root that are not in keep, then the directories
// that removal emptied (deepest first); directories that were empty before are left as they are.
func pruneWorkspace(root *os.Root, keep map[string]bool, maxFileBytes int64) error {
	var removed []string
	err := fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		if isHidden(d.Name()) && rel != PackagesDir { // the packages dir is saved, so restored and pruned too
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || keep[rel] {
			return nil
		}
		if maxFileBytes > 0 {
			if info, err := d.Info(); err != nil || info.Size() > maxFileBytes {
				return nil
			}
		}
		if err := root.Remove(filepath.FromSlash(rel)); err != nil {
			return err
		}
		removed = append(removed, rel)
		return nil
	})
	if err != nil {
		return err
	}
	dirs := map[string]bool{}
	for _, rel := range removed {
		for d := path.Dir(rel); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	ordered := make([]string, 0, len(dirs))
	for d := range dirs {
		ordered = append(ordered, d)
	}
	sort.Slice(ordered, func(i, j int) bool { return len(ordered[i]) > len(ordered[j]) })
	for _, d := range ordered {
		// Remove fails on a directory that still holds something: that is the "left alone" case.
		_ = root.Remove(filepath.FromSlash(d))
	}
	return nil
}
