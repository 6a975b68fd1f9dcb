/* A JSON Schema validator for the subset of draft 2020-12 that
 * api/campaign.schema.json uses, hand-written because the page's
 * Content-Security-Policy forbids eval (so no ajv-style compiled validators)
 * and vendoring a library for twenty keywords is more code to audit than
 * this. It interprets the schema; a keyword it does not know makes
 * BitflipSchema.compile throw, so a schema that grows past this subset is
 * noticed (tests/ui/validate_check.py compares verdicts with
 * python3-jsonschema on a corpus of specs) instead of silently accepted.
 * The daemon's C validator stays the judge: the page only catches mistakes
 * before a round trip. */
(function (root) {
  'use strict';

  var IGNORED = ['$schema', '$id', 'title', 'description', 'default'];
  var KNOWN = IGNORED.concat(['type', 'enum', 'const', 'minLength', 'minimum', 'maximum', 'exclusiveMinimum',
    'exclusiveMaximum', 'required', 'properties', 'additionalProperties', 'minProperties', 'dependentRequired', 'items', 'minItems', 'maxItems',
    'uniqueItems', 'not', 'anyOf', 'oneOf', 'allOf', 'if', 'then', 'else']);

  function kind(v) {
    if (v === null) return 'null';
    if (Array.isArray(v)) return 'array';
    return typeof v;   /* 'object', 'string', 'number', 'boolean' */
  }

  function isType(v, t) {
    var k = kind(v);
    if (t === 'integer') return k === 'number' && Number.isInteger(v);
    return k === t;
  }

  /* JSON equality: 1 and 1.0 are equal, true and 1 are not. */
  function equal(a, b) {
    var ka = kind(a), kb = kind(b);
    if (ka !== kb) return false;
    if (ka === 'array') {
      if (a.length !== b.length) return false;
      for (var i = 0; i < a.length; i++) if (!equal(a[i], b[i])) return false;
      return true;
    }
    if (ka === 'object') {
      var ak = Object.keys(a), bk = Object.keys(b);
      if (ak.length !== bk.length) return false;
      for (var j = 0; j < ak.length; j++) {
        if (!Object.prototype.hasOwnProperty.call(b, ak[j]) || !equal(a[ak[j]], b[ak[j]])) return false;
      }
      return true;
    }
    return a === b;
  }

  function show(v) {
    var s = JSON.stringify(v);
    return s.length > 60 ? s.slice(0, 57) + '...' : s;
  }

  function pointerEscape(key) {
    return String(key).replace(/~/g, '~0').replace(/\//g, '~1');
  }

  /* Refuses a schema with keywords outside the subset, naming where. */
  function check(schema, where) {
    if (schema === true || schema === false) return;
    if (kind(schema) !== 'object') throw new Error('schema at ' + (where || '/') + ' is not an object or boolean');
    Object.keys(schema).forEach(function (k) {
      if (KNOWN.indexOf(k) < 0) throw new Error('schema keyword "' + k + '" at ' + (where || '/') + ' is not supported');
    });
    if (schema.properties) {
      Object.keys(schema.properties).forEach(function (p) {
        check(schema.properties[p], where + '/properties/' + pointerEscape(p));
      });
    }
    ['items', 'additionalProperties', 'not', 'if', 'then', 'else'].forEach(function (k) {
      if (k in schema) check(schema[k], where + '/' + k);
    });
    ['anyOf', 'oneOf', 'allOf'].forEach(function (k) {
      if (k in schema) schema[k].forEach(function (s, i) { check(s, where + '/' + k + '/' + i); });
    });
  }

  /* What a `not` forbids, in words, for the shapes the spec's schema uses. */
  function describeNot(s) {
    if (s && Array.isArray(s.required) && Object.keys(s).length === 1) {
      return 'must not have ' + s.required.map(function (r) { return '"' + r + '"'; }).join(', ') + ' here';
    }
    if (s && Array.isArray(s.anyOf) && s.anyOf.every(function (b) { return b && Array.isArray(b.required); })) {
      var names = [];
      s.anyOf.forEach(function (b) { b.required.forEach(function (r) { names.push('"' + r + '"'); }); });
      return 'must have none of ' + names.join(', ') + ' here';
    }
    return 'is a combination the schema forbids';
  }

  function validate(s, v, ptr, out) {
    if (s === true) return;
    if (s === false) { out.push({pointer: ptr, message: 'this combination of fields is not allowed'}); return; }
    var k = kind(v);
    if ('type' in s) {
      var types = Array.isArray(s.type) ? s.type : [s.type];
      if (!types.some(function (t) { return isType(v, t); })) {
        out.push({pointer: ptr, message: 'must be ' + types.join(' or ') + ', not ' + (k === 'number' ? 'a number' : k)});
        return;   /* the rest of this schema speaks of another type */
      }
    }
    if ('enum' in s && !s.enum.some(function (e) { return equal(e, v); })) {
      out.push({pointer: ptr, message: 'must be one of ' + s.enum.map(show).join(', ') + ', not ' + show(v)});
    }
    if ('const' in s && !equal(s.const, v)) out.push({pointer: ptr, message: 'must be ' + show(s.const)});
    if (k === 'string' && 'minLength' in s && Array.from(v).length < s.minLength) {
      out.push({pointer: ptr, message: s.minLength === 1 ? 'must not be empty' : 'must be at least ' + s.minLength + ' characters'});
    }
    if (k === 'number') {
      if ('minimum' in s && v < s.minimum) out.push({pointer: ptr, message: 'must be at least ' + s.minimum});
      if ('maximum' in s && v > s.maximum) out.push({pointer: ptr, message: 'must be at most ' + s.maximum});
      if ('exclusiveMinimum' in s && v <= s.exclusiveMinimum) out.push({pointer: ptr, message: 'must be more than ' + s.exclusiveMinimum});
      if ('exclusiveMaximum' in s && v >= s.exclusiveMaximum) out.push({pointer: ptr, message: 'must be less than ' + s.exclusiveMaximum});
    }
    if (k === 'array') {
      if ('minItems' in s && v.length < s.minItems) out.push({pointer: ptr, message: s.minItems === 1 ? 'must not be empty' : 'needs at least ' + s.minItems + ' items'});
      if ('maxItems' in s && v.length > s.maxItems) out.push({pointer: ptr, message: 'takes at most ' + s.maxItems + ' items'});
      if (s.uniqueItems) {
        for (var i = 0; i < v.length; i++) {
          for (var j = 0; j < i; j++) {
            if (equal(v[i], v[j])) { out.push({pointer: ptr + '/' + i, message: 'repeats item ' + j + ' (' + show(v[i]) + ')'}); i = v.length; break; }
          }
        }
      }
      if ('items' in s) v.forEach(function (x, n) { validate(s.items, x, ptr + '/' + n, out); });
    }
    if (k === 'object') {
      if ('minProperties' in s && Object.keys(v).length < s.minProperties)
        out.push({pointer: ptr, message: s.minProperties === 1 ? 'must not be empty' : 'needs at least ' + s.minProperties + ' fields'});
      Object.keys(s.dependentRequired || {}).forEach(function (d) {
        if (!Object.prototype.hasOwnProperty.call(v, d)) return;
        s.dependentRequired[d].forEach(function (r) {
          if (!Object.prototype.hasOwnProperty.call(v, r)) out.push({pointer: ptr, message: 'needs "' + r + '" with "' + d + '"'});
        });
      });
      (s.required || []).forEach(function (r) {
        if (!Object.prototype.hasOwnProperty.call(v, r)) out.push({pointer: ptr, message: 'needs "' + r + '"'});
      });
      var props = s.properties || {};
      Object.keys(v).forEach(function (p) {
        var sub = ptr + '/' + pointerEscape(p);
        if (Object.prototype.hasOwnProperty.call(props, p)) validate(props[p], v[p], sub, out);
        else if ('additionalProperties' in s) {
          if (s.additionalProperties === false) {
            out.push({pointer: sub, message: 'unknown field "' + p + '"' +
              (Object.keys(props).length ? ' (known: ' + Object.keys(props).join(', ') + ')' : '')});
          } else {
            validate(s.additionalProperties, v[p], sub, out);
          }
        }
      });
    }
    if (s.allOf) s.allOf.forEach(function (b) { validate(b, v, ptr, out); });
    if (s.anyOf || s.oneOf) {
      var branches = s.anyOf || s.oneOf, best = null, bestFits = false, matched = 0;
      branches.forEach(function (b) {
        var e = [];
        validate(b, v, ptr, e);
        /* a branch of the value's own type speaks of it (an object's
         * errors, not "must be array"): it wins over one of another type */
        var fits = !(b && typeof b === 'object' && 'type' in b) ||
                   [].concat(b.type).some(function (t) { return isType(v, t); });
        if (!e.length) matched++;
        else if (!best || (fits && !bestFits) || (fits === bestFits && e.length < best.length)) { best = e; bestFits = fits; }
      });
      if (s.oneOf && matched > 1) out.push({pointer: ptr, message: 'matches ' + matched + ' alternatives, must match exactly one'});
      if (!matched) {
        if (best && best.length) Array.prototype.push.apply(out, best);
        else out.push({pointer: ptr, message: 'matches none of the alternatives'});
      }
    }
    if ('not' in s) {
      var ne = [];
      validate(s.not, v, ptr, ne);
      if (!ne.length) out.push({pointer: ptr, message: describeNot(s.not)});
    }
    if ('if' in s) {
      var ie = [];
      validate(s.if, v, ptr, ie);
      var branch = ie.length ? s.else : s.then;
      if (branch !== undefined) validate(branch, v, ptr, out);
    }
  }

  var api = {
    /* compile(schema) -> function(doc) -> [{pointer, message}], empty when
     * valid. Throws on a schema outside the subset. */
    compile: function (schema) {
      check(schema, '');
      return function (doc) {
        var out = [];
        validate(schema, doc, '', out);
        return out;
      };
    }
  };
  if (typeof module !== 'undefined' && module.exports) module.exports = api;
  else root.BitflipSchema = api;
})(this);
