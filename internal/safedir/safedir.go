// Package safedir opens, and makes, directories that root prepares for
// other users (the checkpoint root and the per-job directories under it)
// without following any symlink anywhere in the path and without trusting
// any directory another user could change.
//
// A path is walked from "/" one component at a time, each opened with
// openat(O_NOFOLLOW|O_DIRECTORY) under the descriptor of its parent, so no
// symlink is followed and no component is looked up twice. Every directory
// on the way, the last included, must be owned by root and not writable by
// group or others unless it has the sticky bit (then only an entry's owner
// may rename or remove it, and the next component, root's, is safe). A
// directory a user owns anywhere above the checkpoint root lets that user
// swap what is below it (issue 25: a user who made fsx/burst first renames
// burst/checkpoints and plants their own).
package safedir

import "errors"

// ErrUnsafe means a directory on the path is owned by, or writable by,
// someone other than root.
var ErrUnsafe = errors.New("a directory on the path is not root's alone")

// Moved is an entry MkdirAll found in its way and renamed aside.
type Moved struct {
	Path, To, Why string
}
