-- wrk script: GET one path with the key (bench/api-get).
--   SBX_KEY=sbx_... SBX_PATH=/sandboxes/ID wrk -s bench/wrk/get.lua https://127.0.0.1:8443
--   SBX_KEY=sbx_... SBX_PATH='/sandboxes?limit=10' wrk -s bench/wrk/get.lua ...
-- Any answer but 200 is counted and printed at the end (a 429 means the
-- rate limit was not raised; a 401/404 a wrong key or path).
local key = os.getenv("SBX_KEY") or error("SBX_KEY is not set")
local path = os.getenv("SBX_PATH") or error("SBX_PATH is not set")

wrk.method = "GET"
wrk.path = path
wrk.headers["Authorization"] = "Bearer " .. key

local threads = {}
function setup(thread)
	table.insert(threads, thread)
end

function init(args)
	bad = 0
end

function response(status, headers, body)
	if status ~= 200 then
		bad = bad + 1
	end
end

function done(summary, latency, requests)
	local n = 0
	for _, t in ipairs(threads) do
		n = n + t:get("bad")
	end
	io.write(string.format("not-200: %d\n", n))
end
