package stream_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/sluicemq/sluice/api/stream/streampb"
)

// docBlock is one fenced block of a Markdown page: its info string and its
// lines.
type docBlock struct {
	info  string
	lines []string
	line  int // where it starts, for messages
}

// fencedBlocks returns the fenced blocks of a Markdown page.
func fencedBlocks(t *testing.T, page string) []docBlock {
	t.Helper()
	var out []docBlock
	var cur *docBlock
	for i, l := range strings.Split(page, "\n") {
		switch {
		case cur == nil && strings.HasPrefix(l, "```"):
			cur = &docBlock{info: strings.TrimSpace(strings.TrimPrefix(l, "```")), line: i + 1}
		case cur != nil && strings.TrimSpace(l) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, l)
		}
	}
	if cur != nil {
		t.Fatalf("the fenced block at line %d is not closed", cur.line)
	}
	return out
}

// decodeAll decodes every JSON value of text into a new message of type mt,
// with protojson's rules (unknown fields refused), and returns how many it
// found. Each must use the field names protojson writes (lowerCamelCase,
// which is what grpcurl prints; protojson also reads the .proto's names).
// An answer (answer true) must be exactly what protojson writes for its
// message, as grpcurl prints it: 64-bit integers as strings, fields at
// their default left out.
func decodeAll(t *testing.T, where string, mt protoreflect.MessageType, text string, answer bool) int {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(text))
	n := 0
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return n
		}
		if err != nil {
			t.Errorf("%s: not JSON: %v", where, err)
			return n
		}
		n++
		m := mt.New().Interface()
		if err := protojson.Unmarshal(raw, m); err != nil {
			t.Errorf("%s: not a %s in protobuf's JSON form: %v\n%s", where, mt.Descriptor().FullName(), err, raw)
			continue
		}
		var doc, all, canonical any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		b, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(m)
		if err == nil {
			err = json.Unmarshal(b, &all)
		}
		if err != nil {
			t.Fatal(err)
		}
		if path := unknownKey(doc, all, ""); path != "" {
			t.Errorf("%s: %s is not a field name protojson writes (lowerCamelCase)\n%s", where, path, raw)
		}
		if !answer {
			continue
		}
		if b, err = protojson.Marshal(m); err == nil {
			err = json.Unmarshal(b, &canonical)
		}
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(doc, canonical) {
			t.Errorf("%s: not as protojson (and grpcurl) writes this %s:\n%s\nwould be\n%s", where, mt.Descriptor().FullName(), raw, b)
		}
	}
}

// unknownKey returns the path of the first object key of doc that want
// does not have at the same place ("" when none).
func unknownKey(doc, want any, path string) string {
	switch d := doc.(type) {
	case map[string]any:
		w, _ := want.(map[string]any)
		for k, v := range d {
			wv, ok := w[k]
			if !ok {
				return path + "." + k
			}
			if p := unknownKey(v, wv, path+"."+k); p != "" {
				return p
			}
		}
	case []any:
		w, _ := want.([]any)
		for i, v := range d {
			if i >= len(w) {
				return path + "[" + strconv.Itoa(i) + "]"
			}
			if p := unknownKey(v, w[i], path+"["+strconv.Itoa(i)+"]"); p != "" {
				return p
			}
		}
	}
	return ""
}

var (
	grpcurlMethod = regexp.MustCompile(`grpcurl .*-proto (\S+) .*-d @ \S+ (\S+)/(\w+)`)
	echoInput     = regexp.MustCompile(`echo '([^']*)' \| grpcurl`)
)

// Every message docs/streams.md shows is valid for the protocol: the
// grpcurl commands' input (heredocs, echo) for their method's request
// type, and each block marked "json <message>" for that message, with
// the field names and forms protojson takes (lowerCamelCase, no unknown
// field). The commands name a service and method the proto has, and the
// proto file they give.
func TestDocsStreamsJSON(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("../../docs/streams.md")
	if err != nil {
		t.Fatal(err)
	}
	svc := streampb.File_stream_proto.Services().ByName("Streams")
	if svc == nil {
		t.Fatal("stream.proto has no service Streams")
	}
	commands, typed := 0, 0
	for _, b := range fencedBlocks(t, string(page)) {
		lang, name, _ := strings.Cut(b.info, " ")
		switch {
		case lang == "json" && name != "":
			mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(name))
			if err != nil {
				t.Errorf("line %d: block of %s: no such message: %v", b.line, name, err)
				continue
			}
			answer := false
			for _, md := range methods(svc) {
				answer = answer || md.Output().FullName() == mt.Descriptor().FullName()
			}
			if decodeAll(t, "line "+strconv.Itoa(b.line), mt, strings.Join(b.lines, "\n"), answer) == 0 {
				t.Errorf("line %d: block of %s holds no message", b.line, name)
			}
			typed++
		case lang == "sh":
			for i, l := range b.lines {
				m := grpcurlMethod.FindStringSubmatch(l)
				if m == nil {
					if strings.Contains(l, "grpcurl ") {
						t.Errorf("line %d: a grpcurl command without -proto, -d @ and a method: %s", b.line+1+i, l)
					}
					continue
				}
				commands++
				where := "line " + strconv.Itoa(b.line+1+i)
				if _, err := os.Stat("../../" + m[1]); err != nil {
					t.Errorf("%s: -proto %s: %v", where, m[1], err)
				}
				if m[2] != string(svc.FullName()) {
					t.Errorf("%s: service %s, want %s", where, m[2], svc.FullName())
					continue
				}
				md := svc.Methods().ByName(protoreflect.Name(m[3]))
				if md == nil {
					t.Errorf("%s: the service has no method %s", where, m[3])
					continue
				}
				mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
				if err != nil {
					t.Fatal(err)
				}
				if e := echoInput.FindStringSubmatch(l); e != nil {
					decodeAll(t, where, mt, e[1], false)
				}
				if strings.HasSuffix(l, "<<'EOF'") {
					var in bytes.Buffer
					for _, h := range b.lines[i+1:] {
						if h == "EOF" {
							break
						}
						in.WriteString(h + "\n")
					}
					if decodeAll(t, where, mt, in.String(), false) == 0 {
						t.Errorf("%s: the heredoc holds no message", where)
					}
				}
			}
		}
	}
	if commands < 3 || typed < 5 {
		t.Fatalf("found %d grpcurl commands and %d typed JSON blocks: the page's format changed, and this test with it", commands, typed)
	}
}

// methods lists a service's methods.
func methods(svc protoreflect.ServiceDescriptor) []protoreflect.MethodDescriptor {
	var out []protoreflect.MethodDescriptor
	for i := range svc.Methods().Len() {
		out = append(out, svc.Methods().Get(i))
	}
	return out
}
