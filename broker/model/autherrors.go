package model

import (
	"errors"
	"fmt"
)

// The sentinels of authentication (package auth verifies requests and
// returns them in an *Error; each API maps them to its own shape in its one
// error table). They are here, beside the broker's own sentinels, so that
// both APIs' tables can name them without importing package auth.
var (
	// ErrMissingAuthenticationToken: authentication is on and the request
	// carries no signature or token.
	ErrMissingAuthenticationToken = errors.New("missing authentication token")
	// ErrIncompleteSignature: the request's signature or token is malformed
	// (a missing part, an unknown algorithm, an unsigned part that must be
	// signed).
	ErrIncompleteSignature = errors.New("incomplete signature")
	// ErrInvalidClientTokenID: the access key id names no configured key.
	ErrInvalidClientTokenID = errors.New("invalid client token id")
	// ErrSignatureDoesNotMatch: the signature (or the bearer token's
	// secret) is not the one the key's secret gives.
	ErrSignatureDoesNotMatch = errors.New("signature does not match")
	// ErrRequestExpired: the request's date is outside the clock-skew
	// window, or a presigned request's expiry has passed.
	ErrRequestExpired = errors.New("request expired")
	// ErrKeyNotAllowed: the request is authenticated, but its key's allow
	// list does not include the action. It wraps ErrAccessDenied (AWS's
	// AccessDenied), so the error tables answer both alike.
	ErrKeyNotAllowed = fmt.Errorf("%w: the key may not do this action", ErrAccessDenied)
)
