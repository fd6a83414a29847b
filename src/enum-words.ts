import type { DescEnum } from "@bufbuild/protobuf";

/*
 * Proto enums carry the documented words in their value names (PAYMENT_STATUS_REQUIRES_CAPTURE ↔
 * "requires_capture"). The REST dialect, the database and events all speak the words; these two
 * functions are the one mapping between them.
 */

/** The documented word for an enum value: its name without the enum's shared prefix, lower-cased. */
export function enumWord(desc: DescEnum, number: number): string | null {
  const value = desc.value[number];
  if (value === undefined || number === 0) {
    return null;
  }
  return value.name.slice(desc.sharedPrefix?.length ?? 0).toLowerCase();
}

const wordsByEnum = new WeakMap<DescEnum, Map<string, number>>();

/** The enum number for a documented word, or undefined when the word is not one of the enum's. */
export function enumNumber(desc: DescEnum, word: string): number | undefined {
  let words = wordsByEnum.get(desc);
  if (words === undefined) {
    words = new Map(desc.values.flatMap((v) => (v.number === 0 ? [] : [[enumWord(desc, v.number)!, v.number]])));
    wordsByEnum.set(desc, words);
  }
  return words.get(word);
}

/**
 * The documented word of an enum value a client sent; UNSPECIFIED (0) means not given (undefined).
 * The value is one of the enum's: every request passes assertWellFormedMessage first.
 */
export function sentWord(desc: DescEnum, value: number | undefined): string | undefined {
  if (value === undefined || value === 0) return undefined;
  return enumWord(desc, value) ?? undefined;
}
