import { describe, expect, it } from 'vitest';
import { keySet } from './key-lookup.js';
import { BODY_PIECE_BYTES, bodyPieces } from './load-step.js';

/** `count` rows of sizes from `sizeOf`, each filled with its own index so that order shows. */
function rows(count: number, sizeOf: (index: number) => number): Buffer[] {
  return Array.from({ length: count }, (_, index) => Buffer.alloc(sizeOf(index), index % 251));
}

describe('bodyPieces', () => {
  it('sends the rows one after the other, unchanged, in pieces that end where a row reaches the piece size', () => {
    for (const unit of [rows(5000, (index) => 200 + ((index * 7919) % 5000)), rows(3, () => 10), rows(1, () => 1)]) {
      const pieces = [...bodyPieces(unit)];
      expect(Buffer.concat(pieces).equals(Buffer.concat(unit))).toBe(true);
      let row = 0;
      for (const [index, piece] of pieces.entries()) {
        // Each piece is whole rows: it starts with a row and ends with one.
        let bytes = 0;
        const first = row;
        while (bytes < piece.length) bytes += unit[row++]!.length;
        expect(bytes).toBe(piece.length);
        // Without its last row a piece is under the piece size; with it, at least that (but the last piece).
        expect(bytes - unit[row - 1]!.length).toBeLessThan(BODY_PIECE_BYTES);
        if (index < pieces.length - 1) expect(bytes).toBeGreaterThanOrEqual(BODY_PIECE_BYTES);
        else expect(row).toBe(unit.length);
        expect(row).toBeGreaterThan(first);
      }
    }
  });

  it('sends a row larger than a piece as a piece of its own, where it lies', () => {
    const unit = rows(3, (index) => (index === 1 ? 3 * BODY_PIECE_BYTES : 100));
    const pieces = [...bodyPieces(unit)];
    expect(pieces.map((piece) => piece.length)).toEqual([100, 3 * BODY_PIECE_BYTES, 100]);
    expect(pieces[1]!.buffer).toBe(unit[1]!.buffer);
  });

  it('sends rows lying one after the other in memory where they lie, and copies only around a row left out', () => {
    // Rows as the encoder leaves them: views of blocks, one after the other.
    const blocks = [Buffer.alloc(BODY_PIECE_BYTES), Buffer.alloc(BODY_PIECE_BYTES)];
    const unit: Buffer[] = [];
    for (const [number, block] of blocks.entries()) {
      block.fill(number + 1);
      for (let start = 0; start + 3000 <= block.length; start += 3000) unit.push(block.subarray(start, start + 3000));
    }
    for (const [index, row] of unit.entries()) row.writeUInt32LE(index);
    const whole = [...bodyPieces(unit)];
    expect(Buffer.concat(whole).equals(Buffer.concat(unit))).toBe(true);
    expect(whole.map((piece) => piece.buffer)).toEqual(blocks.map((block) => block.buffer));

    // One row in forty already stored: the rest still go where they lie, between the gaps.
    const some = unit.filter((_, index) => index % 40 !== 3);
    const pieces = [...bodyPieces(some)];
    expect(Buffer.concat(pieces).equals(Buffer.concat(some))).toBe(true);
    expect(pieces.filter((piece) => blocks.some((block) => piece.buffer === block.buffer)).length).toBeGreaterThan(0);
    expect(pieces.length).toBeLessThan(some.length / 4);
  });

  it('sends nothing for no rows', () => {
    expect([...bodyPieces([])]).toEqual([]);
  });
});

describe('keySet', () => {
  it('sends the keys as one literal that ClickHouse splits, escaped', () => {
    expect(keySet(['a', "o'b", 'c\\d'])).toBe("(SELECT arrayJoin(splitByChar('\n', 'a\no\\'b\nc\\\\d')))");
  });

  it('sends them as a list of literals when one holds the separator', () => {
    expect(keySet(['a', 'b\nc'])).toBe("('a','b\nc')");
  });
});
