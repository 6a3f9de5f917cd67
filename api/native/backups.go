package native

import (
	"net/http"

	"github.com/sluicemq/sluice/api/native/wire"
	"github.com/sluicemq/sluice/broker/model"
)

// createBackup writes an online backup of the store (broker.Broker.Backup).
func (h *Handler) createBackup(c *call) (any, error) {
	if _, err := queryOf(c.r); err != nil {
		return nil, err
	}
	var in wire.BackupRequest
	if err := h.decode(c, &in, false); err != nil {
		return nil, err
	}
	if in.Name == "" {
		return nil, errorf(model.ErrMissingParameter, "Field name is required.")
	}
	path, err := h.broker.Backup(c.ctx, in.Name)
	if err != nil {
		return nil, err
	}
	c.status = http.StatusCreated
	return wire.Backup{Name: in.Name, Path: path}, nil
}
