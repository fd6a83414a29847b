/** The one timestamp format the API answers with: RFC 3339 in UTC, milliseconds optional. */
export const isoUtc = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
