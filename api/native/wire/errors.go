package wire

// ErrorBody is the body of every error answer, and the error of a failed
// BatchResult.
type ErrorBody struct {
	// Code is the API's error code ("queue_not_found", "queue_full", ...):
	// openapi.json's ErrorCode lists them, each with one HTTP status.
	Code string `json:"code"`
	// Message says what went wrong, naming the field or value at fault.
	Message string `json:"message"`
}
