// The header row of a data table (billing, team, usage and operator pages): one column heading a
// cell, each `scope="col"` for screen readers, number columns right-aligned like their cells.

/** A column heading: its label, or the label and `num` for a column of numbers (`class="num"`). */
export type Column = string | { label: string; num: true };

/** `<thead>` with one `<th scope="col">` a column, in order; a null column (one only some
 * readers see, e.g. an owner's actions) is left out. Labels must differ within a table. */
export function TableHead(props: { columns: (Column | null)[] }) {
  return (
    <thead>
      <tr>
        {props.columns.map((c) =>
          c === null ? null : typeof c === 'string' ? (
            <th key={c} scope="col">
              {c}
            </th>
          ) : (
            <th key={c.label} scope="col" class="num">
              {c.label}
            </th>
          ),
        )}
      </tr>
    </thead>
  );
}
