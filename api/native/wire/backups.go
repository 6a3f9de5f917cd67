package wire

// BackupRequest is the body of POST /v1/backups.
type BackupRequest struct {
	// Name is the backup's directory under the broker's --backup-dir
	// (1..80 of [A-Za-z0-9._-], starting with a letter or a digit); it
	// must not exist.
	Name string `json:"name"`
}

// Backup is the answer of POST /v1/backups (201 Created): a backup the
// broker wrote.
type Backup struct {
	// Name is the backup's directory under the broker's --backup-dir.
	Name string `json:"name"`
	// Path is the backup's directory on the broker's machine: a data
	// directory that sluice serve --data opens as it is.
	Path string `json:"path"`
}
