-- pandoc filter for hack/docs.sh: docs/*.md -> docs/docsite/rst/*.rst.
-- A link to another guide becomes a :ref: to that guide's label; a link to any
-- other file of the repository becomes an absolute link to it on GitHub (the
-- rendered docs live outside the repository).
local prefix = "ansible_collections.awa.operations.docsite."
local repository = "https://github.com/awa-operations/awa.operations/blob/main/"

local function escape(text)
  return (text:gsub("([<>`])", "\\%1"))
end

function Link(link)
  local target = link.target
  if target:match("^%a[%w+.-]*:") or target:match("^#") then
    return nil
  end
  local path = target:gsub("#.*$", "")
  local guide = path:match("^([%w_-]+)%.md$")
  if guide then
    local text = escape(pandoc.utils.stringify(link.content))
    return pandoc.RawInline("rst", ":ref:`" .. text .. " <" .. prefix .. guide .. ">`")
  end
  -- Relative to docs/: normalise ../x to x.
  local from_root = ("docs/" .. path):gsub("[^/]+/%.%./", "")
  link.target = repository .. from_root
  return link
end

-- An image of docs/ (the benchmark charts in docs/images) is shown from
-- GitHub: the rendered docs live outside the repository.
local raw = "https://raw.githubusercontent.com/awa-operations/awa.operations/main/"
function Image(image)
  if not image.src:match("^%a[%w+.-]*:") then
    image.src = raw .. ("docs/" .. image.src):gsub("[^/]+/%.%./", "")
  end
  return image
end

-- A code block without a language is plain text (Sphinx would highlight it
-- as the site's default, YAML+Jinja, and warn when it is not).
function CodeBlock(block)
  if #block.classes == 0 then
    block.classes = {"text"}
  end
  return block
end

-- RST cannot skip a heading level (Markdown can: "##" then "####"): a
-- heading is at most one level below the one before it.
local last_level = 0
function Header(header)
  if header.level > last_level + 1 then
    header.level = last_level + 1
  end
  last_level = header.level
  return header
end
