// Cursor pagination as the API does it (`after` = the id of the last item of the previous page): the
// cursors of the pages before this one are kept, so that "Previous page" goes back.
import { useCallback, useState } from 'react';
import Button from 'react-bootstrap/Button';

export interface CursorPages {
  /** The cursor of the page shown (undefined: the first page). */
  after: string | undefined;
  page: number;
  next(lastId: string): void;
  previous(): void;
  reset(): void;
}

export function useCursorPages(): CursorPages {
  const [cursors, setCursors] = useState<string[]>([]);
  const next = useCallback((lastId: string) => setCursors((c) => [...c, lastId]), []);
  const previous = useCallback(() => setCursors((c) => c.slice(0, -1)), []);
  const reset = useCallback(() => setCursors((c) => (c.length ? [] : c)), []);
  return { after: cursors.at(-1), page: cursors.length + 1, next, previous, reset };
}

export function Pager({ pages, hasMore, lastId }: { pages: CursorPages; hasMore: boolean; lastId: string | undefined }) {
  if (pages.page === 1 && !hasMore) return null;
  return (
    <div className="d-flex align-items-center gap-2">
      <Button size="sm" variant="outline-secondary" disabled={pages.page === 1} onClick={pages.previous}>
        Previous page
      </Button>
      <span className="small">Page {pages.page}</span>
      <Button size="sm" variant="outline-secondary" disabled={!hasMore || !lastId} onClick={() => lastId && pages.next(lastId)}>
        Next page
      </Button>
    </div>
  );
}
