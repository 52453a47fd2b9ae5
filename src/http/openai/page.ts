// OpenAI's list page: the SDKs' auto-paging iterators pass `last_id` as the next `after` while `has_more`.
export function openAiPage<T extends { id: string }>(data: T[], has_more: boolean) {
  return { object: 'list' as const, data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more };
}
