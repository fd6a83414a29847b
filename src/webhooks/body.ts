/**
 * The body of an event's webhook: the event as retrieve shows it, without its delivery state. Its
 * `data` is written the way the database orders a jsonb object, whether it comes from the event's
 * writer or from the database, so that every attempt of one delivery sends the very same bytes.
 */
export function webhookBody(eventId: string, type: string, created: Date, data: unknown): string {
  return `{"event_id":${JSON.stringify(eventId)},"type":${JSON.stringify(type)},"created":"${created.toISOString()}","data":${jsonbText(data)}}`;
}

/** A key with its length in UTF-8 bytes, which jsonb orders by first. */
interface Key {
  readonly name: string;
  readonly bytes: number;
}

/** jsonb's order of an object's keys: shorter (in UTF-8 bytes) first, then byte by byte. */
function jsonbKeyOrder(a: Key, b: Key): number {
  if (a.bytes !== b.bytes) return a.bytes - b.bytes;
  // UTF-16 order is UTF-8 byte order except between astral characters and U+E000–U+FFFF.
  if (a.bytes === a.name.length && b.bytes === b.name.length) return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
  return Buffer.compare(Buffer.from(a.name), Buffer.from(b.name));
}

/** An object's keys in jsonb's order, each with the text that starts its member. */
interface Shape {
  readonly names: readonly string[];
  readonly prefixes: readonly string[];
}

/**
 * The shapes met so far, by their keys in the object's own order: an event's data is one of a few
 * resources' views, so ordering their keys once, not at every delivery, keeps a body about as cheap
 * to write as `JSON.stringify` would.
 */
const shapes = new Map<string, Shape>();
/** Beyond this many shapes (metadata objects each bring their own), they are worked out afresh. */
const shapesKept = 1000;

function shapeOf(object: Record<string, unknown>): Shape {
  const keys = Object.keys(object);
  // As JSON, two different lists of keys never read alike, whatever characters the keys hold.
  const id = JSON.stringify(keys);
  const known = shapes.get(id);
  if (known !== undefined) return known;
  const names = keys
    .map((name) => ({ name, bytes: Buffer.byteLength(name) }))
    .sort(jsonbKeyOrder)
    .map((key) => key.name);
  const shape = { names, prefixes: names.map((name) => `${JSON.stringify(name)}:`) };
  if (shapes.size >= shapesKept) shapes.clear();
  shapes.set(id, shape);
  return shape;
}

/** A JSON value (as `JSON.parse` makes them) written compactly, each object's keys in jsonb's order. */
export function jsonbText(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(jsonbText).join(",")}]`;
  const object = value as Record<string, unknown>;
  const { names, prefixes } = shapeOf(object);
  let text = "{";
  for (let i = 0; i < names.length; i++) text += `${i === 0 ? "" : ","}${prefixes[i]}${jsonbText(object[names[i]!])}`;
  return `${text}}`;
}
