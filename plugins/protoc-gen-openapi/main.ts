import { createEcmaScriptPlugin, runNodeJs } from "@bufbuild/protoplugin";
import { openApiDocument } from "./document.js";

/** Where the document is written under the output directory; the server reads it from gen/. */
const fileName = "openapi.json";

/**
 * protoc-gen-openapi: writes the OpenAPI 3.1 document of the REST dialect from the protos buf hands
 * it, so the document is generated with the code and cannot drift from the routes.
 */
const plugin = createEcmaScriptPlugin({
  name: "protoc-gen-openapi",
  version: "v1",
  generateTs(schema) {
    const file = schema.generateFile(fileName);
    file.print(JSON.stringify(openApiDocument(schema.allFiles), null, 2));
  },
});

runNodeJs(plugin);
