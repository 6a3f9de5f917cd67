package sqssource

// LeaseLostCode exposes leaseLostCode to the external tests.
var LeaseLostCode = leaseLostCode
