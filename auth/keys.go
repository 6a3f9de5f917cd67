// Package auth authenticates requests to the broker: it holds the access
// keys (a keys file, reloadable), verifies AWS Signature Version 4 (the
// Authorization header form and the presigned query form) and the native
// API's bearer token, and decides whether a key may do an action. It decides
// nothing about queues: the server calls it before any API handler, and the
// APIs turn its errors (the broker's authentication sentinels,
// broker/autherrors.go) into their own error shapes.
//
// Authentication is on when keys are configured and off otherwise; the
// server and `sluice serve` decide when running without keys is allowed.
package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
)

// Key is one access key, as the keys file lists it.
type Key struct {
	// AccessKeyID is the key's public id (what SDKs call the access key
	// id): 1..128 characters of letters, digits, '_', '-' and '.'.
	AccessKeyID string `json:"accessKeyId"`
	// SecretAccessKey is the key's secret: at least 8 characters.
	SecretAccessKey string `json:"secretAccessKey"`
	// Account is the account the key belongs to: 12 digits.
	Account string `json:"account"`
	// Allow lists what the key may do: SQS action names (SendMessage,
	// ReceiveMessage, …, and GetCallerIdentity), "native:read" (GET on the
	// native API and /metrics), "native:write" (every other native API
	// call), or the presets "*" (everything) and "read-only" (ReadOnly).
	// Empty is an error: a key that may do nothing is a mistake.
	Allow []string `json:"allow"`
}

// Permissions of the native API and of /metrics (the SQS ones are the SQS
// action names).
const (
	// NativeRead is every GET (and HEAD) of the native API under /v1/, the
	// dashboard's live statistics and events, and GET /metrics.
	NativeRead = "native:read"
	// NativeWrite is every other call of the native API.
	NativeWrite = "native:write"
	// AllowAll is the preset that allows everything.
	AllowAll = "*"
	// AllowReadOnly is the preset that allows ReadOnly.
	AllowReadOnly = "read-only"
)

// ReadOnly is what the "read-only" preset allows: the SQS actions that
// change nothing (ReceiveMessage is not one: it leases messages), and
// native:read.
var ReadOnly = []string{
	"GetQueueUrl", "ListQueues", "GetQueueAttributes", "ListQueueTags",
	"ListDeadLetterSourceQueues", "ListMessageMoveTasks", "GetCallerIdentity",
	NativeRead,
}

// Actions is every name an allow list may hold besides the presets: the
// SQS actions and the native permissions.
var Actions = []string{
	"CreateQueue", "GetQueueUrl", "ListQueues", "DeleteQueue", "PurgeQueue",
	"GetQueueAttributes", "SetQueueAttributes", "SendMessage", "SendMessageBatch",
	"ReceiveMessage", "DeleteMessage", "DeleteMessageBatch", "ChangeMessageVisibility",
	"ChangeMessageVisibilityBatch", "TagQueue", "UntagQueue", "ListQueueTags",
	"AddPermission", "RemovePermission", "ListDeadLetterSourceQueues",
	"StartMessageMoveTask", "ListMessageMoveTasks", "CancelMessageMoveTask",
	"GetCallerIdentity", NativeRead, NativeWrite,
}

// key is a validated Key with its allow list as a set.
type key struct {
	Key
	all   bool
	allow map[string]bool
}

func (k *key) allowed(action string) bool { return k.all || k.allow[action] }

// ParseKeys reads a keys file's content: a JSON list of Key. It reports the
// first invalid entry by its position and access key id.
func ParseKeys(data []byte) ([]Key, error) {
	var keys []Key
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&keys); err != nil {
		return nil, fmt.Errorf("keys file: not a JSON list of keys ({\"accessKeyId\", \"secretAccessKey\", \"account\", \"allow\"}): %v", err)
	}
	if dec.More() {
		return nil, errors.New("keys file: data after the JSON list")
	}
	if _, err := index(keys); err != nil {
		return nil, err
	}
	return keys, nil
}

// index validates keys and returns them by access key id.
func index(keys []Key) (map[string]*key, error) {
	if len(keys) == 0 {
		return nil, errors.New("keys file: no keys (to run without authentication, start without a keys file)")
	}
	known := map[string]bool{AllowAll: true, AllowReadOnly: true}
	for _, a := range Actions {
		known[a] = true
	}
	byID := make(map[string]*key, len(keys))
	for i, k := range keys {
		where := fmt.Sprintf("keys file: key %d (%q)", i+1, k.AccessKeyID)
		if !validID(k.AccessKeyID) {
			return nil, fmt.Errorf("%s: accessKeyId must be 1..128 letters, digits, '_', '-' or '.'", where)
		}
		if byID[k.AccessKeyID] != nil {
			return nil, fmt.Errorf("%s: accessKeyId listed twice", where)
		}
		if len(k.SecretAccessKey) < 8 || strings.ContainsAny(k.SecretAccessKey, " \t\r\n") {
			return nil, fmt.Errorf("%s: secretAccessKey must be at least 8 characters without spaces", where)
		}
		if !validAccount(k.Account) {
			return nil, fmt.Errorf("%s: account %q must be 12 digits", where, k.Account)
		}
		if len(k.Allow) == 0 {
			return nil, fmt.Errorf("%s: allow is empty; list actions, or \"*\" or \"read-only\"", where)
		}
		kk := &key{Key: k, allow: map[string]bool{}}
		for _, a := range k.Allow {
			if !known[a] {
				return nil, fmt.Errorf("%s: allow names %q, which is no SQS action, %q, %q, %q or %q", where, a, NativeRead, NativeWrite, AllowAll, AllowReadOnly)
			}
			switch a {
			case AllowAll:
				kk.all = true
			case AllowReadOnly:
				for _, r := range ReadOnly {
					kk.allow[r] = true
				}
			default:
				kk.allow[a] = true
			}
		}
		byID[k.AccessKeyID] = kk
	}
	return byID, nil
}

func validID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func validAccount(a string) bool {
	if len(a) != 12 {
		return false
	}
	for i := 0; i < len(a); i++ {
		if a[i] < '0' || a[i] > '9' {
			return false
		}
	}
	return true
}

// Keys is the set of access keys a broker accepts. Reload replaces them
// from the keys file; a bad file keeps the keys in use. Safe for concurrent
// use.
type Keys struct {
	path string // "" for keys given in code

	mu   sync.RWMutex
	byID map[string]*key
}

// NewKeys returns the given keys (validated as a keys file's entries).
func NewKeys(keys []Key) (*Keys, error) {
	byID, err := index(keys)
	if err != nil {
		return nil, err
	}
	return &Keys{byID: byID}, nil
}

// LoadKeys reads the keys file at path.
func LoadKeys(path string) (*Keys, error) {
	k := &Keys{path: path}
	if err := k.Reload(); err != nil {
		return nil, err
	}
	return k, nil
}

// Reload reads the keys file again (LoadKeys's path) and, when it is valid,
// replaces the keys; when it is not, the keys in use stay and the error
// says why. Keys made by NewKeys have no file: Reload does nothing.
func (k *Keys) Reload() error {
	if k.path == "" {
		return nil
	}
	data, err := os.ReadFile(k.path)
	if err != nil {
		return fmt.Errorf("keys file: %w", err)
	}
	keys, err := ParseKeys(data)
	if err != nil {
		return fmt.Errorf("%s: %w", k.path, err)
	}
	byID, _ := index(keys)
	k.mu.Lock()
	k.byID = byID
	k.mu.Unlock()
	return nil
}

// Path is the keys file's path ("" for keys given in code).
func (k *Keys) Path() string { return k.path }

// Len is the number of keys.
func (k *Keys) Len() int {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return len(k.byID)
}

// IDs returns the access key ids, sorted.
func (k *Keys) IDs() []string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	ids := make([]string, 0, len(k.byID))
	for id := range k.byID {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (k *Keys) lookup(id string) *key {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.byID[id]
}
