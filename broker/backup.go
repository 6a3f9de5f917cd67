package broker

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"regexp"

	"github.com/sluicemq/sluice/broker/model"
)

// backupName is what a backup's name may be: it names a directory under
// Config.BackupDir.
var backupName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$`)

// Backup writes an online backup of the store into the directory name
// under Config.BackupDir, and returns its path. It is refused when
// BackupDir is not set (ErrUnsupportedOperation), when the backend cannot
// (ErrUnsupportedOperation), for a bad name (ErrInvalidParameterValue),
// when a backup of that name exists (ErrConflict), and for a caller of
// another account than the broker's own (ErrAccessDenied: a backup holds
// every account's queues).
func (b *Broker) Backup(ctx context.Context, name string) (string, error) {
	if err := b.OwnAccountOnly(ctx, "take a backup of the store"); err != nil {
		return "", err
	}
	if b.cfg.BackupDir == "" {
		return "", model.Errorf(model.ErrUnsupportedOperation, "Backups are off: start the broker with --backup-dir (or SLUICE_BACKUP_DIR) to name where they go.")
	}
	if !b.backend.Backups() {
		return "", model.BackupsUnsupportedError()
	}
	if !backupName.MatchString(name) {
		return "", model.InvalidParameterError(name, "name", "a backup name is 1 to 80 letters, digits, '.', '_' or '-', starting with a letter or digit.")
	}
	dir := filepath.Join(b.cfg.BackupDir, name)
	if err := b.backend.Backup(ctx, dir); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return "", model.Errorf(model.ErrConflict, "A backup named %s exists already.", name)
		}
		return "", err
	}
	return dir, nil
}
