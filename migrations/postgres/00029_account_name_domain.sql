-- +goose Up
-- Accounts were named after their owner's e-mail address; a new one is named after its domain
-- (docs/console.md, "Named organisations"). Existing ones follow, where the name is still an address.
UPDATE accounts SET name = split_part(name, '@', 2) WHERE position('@' IN name) > 0 AND split_part(name, '@', 2) <> '';

-- +goose Down
-- Nothing to undo: the address each name came from is the owner's, in users.
SELECT 1;
