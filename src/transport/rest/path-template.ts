import { ScalarType, type DescField, type DescMessage } from "@bufbuild/protobuf";

/** One segment of a path template: fixed text, or a variable bound to a request field. */
export type PathSegment = { literal: string } | { variable: DescField };

/**
 * Parses the path of a google.api.http rule (e.g. `/customers/{customer_id}`) against the request
 * message it fills. Only the forms our protos use are accepted — literal segments and single-segment
 * variables naming a top-level string field — so an unsupported template fails at start-up rather
 * than routing wrongly at run time.
 */
export function parsePathTemplate(template: string, input: DescMessage): PathSegment[] {
  if (!template.startsWith("/")) {
    throw new Error(`path template ${template} must start with "/"`);
  }
  return template
    .slice(1)
    .split("/")
    .map((segment) => {
      const variable = /^\{([a-z0-9_]+)(=\*)?\}$/.exec(segment);
      if (variable === null) {
        if (!/^[A-Za-z0-9_.~-]+$/.test(segment)) {
          throw new Error(`unsupported segment "${segment}" in path template ${template}`);
        }
        return { literal: segment };
      }
      const field = input.fields.find((f) => f.name === variable[1]);
      if (field?.fieldKind !== "scalar" || field.scalar !== ScalarType.STRING) {
        throw new Error(`path variable ${variable[1]} of ${template} is not a string field of ${input.typeName}`);
      }
      return { variable: field };
    });
}
