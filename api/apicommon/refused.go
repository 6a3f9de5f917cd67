package apicommon

import "errors"

// ErrRefused is the error of a request the server refused before an API
// read it: a browser's cross-site request, a Host header the server does not
// answer to (DNS rebinding), or a dashboard action without its CSRF token
// (package server's guard). The server builds it with model.Errorf, so its
// message says why and what to change; each protocol maps it to its own
// shape: SQS's AccessDenied (403), the native API's request_refused (403).
var ErrRefused = errors.New("request refused")
