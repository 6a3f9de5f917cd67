package native

import (
	_ "embed"
	"net/http"
)

// openAPIDocument is the OpenAPI 3.1 description of every route, written by
// hand beside the handlers; TestOpenAPIMatchesRoutes checks it against them.
//
//go:embed openapi.json
var openAPIDocument []byte

func (h *Handler) openAPI(c *call) (any, error) {
	if _, err := queryOf(c.r); err != nil {
		return nil, err
	}
	c.w.Header().Set("Content-Type", "application/json")
	c.w.Header().Set("Cache-Control", "no-cache")
	c.w.WriteHeader(http.StatusOK)
	_, _ = c.w.Write(openAPIDocument)
	return served{}, nil
}
