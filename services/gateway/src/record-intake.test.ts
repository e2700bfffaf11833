// crowdedObject: the walk that refuses an object with too many members before the
// validator sees it (record-intake.ts).
import { describe, expect, it } from 'vitest';
import { crowdedObject } from './record-intake.js';

const members = (count: number) => Object.fromEntries(Array.from({ length: count }, (_, i) => [`m${i}`, i]));

describe('crowdedObject', () => {
  it('finds nothing in a record whose objects hold at most the bound', () => {
    expect(crowdedObject({ a: members(4), b: [members(4), { c: members(4) }], d: 'text' }, 4)).toBeUndefined();
    expect(crowdedObject('text', 4)).toBeUndefined();
    expect(crowdedObject(null, 4)).toBeUndefined();
  });

  it('names the crowded object by its JSON pointer, escaping ~ and /', () => {
    expect(crowdedObject(members(5), 4)).toEqual({ path: '', members: 5 });
    expect(crowdedObject({ a: { 'x/y~z': [1, { deep: members(9) }] } }, 4)).toEqual({ path: '/a/x~1y~0z/1/deep', members: 9 });
  });

  it('counts own members only', () => {
    const inherited = Object.create(members(10)) as Record<string, unknown>;
    inherited.own = 1;
    expect(crowdedObject({ context: inherited }, 4)).toBeUndefined();
  });

  it('reports the first crowded object of a sibling list, leaving no trace of the ones before', () => {
    expect(crowdedObject({ a: [members(2), members(3)], b: { c: members(7) } }, 4)).toEqual({ path: '/b/c', members: 7 });
  });
});
