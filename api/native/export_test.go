package native

// RoutePatterns returns the "METHOD /path" pattern of every route, for the
// tests of package native_test.
func RoutePatterns() []string {
	out := make([]string, len(routes))
	for i, rt := range routes {
		out[i] = rt.method + " " + rt.path
	}
	return out
}
