// The package's copy of stream.proto is the broker's.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { it } from "node:test";

import { protoPath } from "../src/index.js";
import { repoRoot } from "./harness.js";

it("proto/stream.proto is a copy of api/stream/streampb/stream.proto", () => {
  const broker = readFileSync(join(repoRoot, "api/stream/streampb/stream.proto"), "utf8");
  const copy = readFileSync(protoPath, "utf8");
  assert.ok(copy === broker, "clients/typescript/proto/stream.proto differs from api/stream/streampb/stream.proto: copy it again (cp api/stream/streampb/stream.proto clients/typescript/proto/)");
});
