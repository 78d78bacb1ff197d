-- +goose Up
-- Accounts were named after their owner's e-mail address; a new one is named after its domain
-- (docs/console.md, "Named organisations"). Existing ones follow, where the name is still an address.
UPDATE accounts SET name = substr(name, instr(name, '@') + 1) WHERE instr(name, '@') > 0 AND substr(name, instr(name, '@') + 1) <> '';

-- +goose Down
-- Nothing to undo: the address each name came from is the owner's, in users.
SELECT 1;
