import { invalidField } from "../errors.js";

/** Limits of decisions §4: enough for references and tags, not for storing documents. */
const maxKeys = 50;
const maxKeyLength = 40;
const maxValueLength = 500;

function checkEntries(field: string, entries: Record<string, string>): void {
  for (const [key, value] of Object.entries(entries)) {
    if (key.length === 0 || key.length > maxKeyLength) {
      throw invalidField(`${field}.${key}`, `metadata keys must have 1-${maxKeyLength} characters`);
    }
    if (value.length > maxValueLength) {
      throw invalidField(`${field}.${key}`, `metadata values must have at most ${maxValueLength} characters`);
    }
  }
}

function checkCount(field: string, merged: Record<string, string>): void {
  if (Object.keys(merged).length > maxKeys) {
    throw invalidField(field, `at most ${maxKeys} keys`);
  }
}

/** Metadata of a new object; keys sent with "" are simply not stored. */
export function newMetadata(field: string, sent: Record<string, string>): Record<string, string> {
  checkEntries(field, sent);
  const stored = Object.fromEntries(Object.entries(sent).filter(([, v]) => v !== ""));
  checkCount(field, stored);
  return stored;
}

/** Metadata after an update: sent keys are added or replaced, a key sent as "" is removed. */
export function mergeMetadata(field: string, current: Record<string, string>, sent: Record<string, string>): Record<string, string> {
  checkEntries(field, sent);
  const merged = { ...current };
  for (const [key, value] of Object.entries(sent)) {
    if (value === "") delete merged[key];
    else merged[key] = value;
  }
  checkCount(field, merged);
  return merged;
}
