-- Argo CD health of a PtahSchema or a PtahMigration (operator.ptah.run/v1alpha1),
-- read from what the operator publishes: status.phase, status.observedGeneration
-- and kstatus's conditions (Ready, Stalled). Argo CD runs it in gopher-lua (Lua 5.1)
-- with the live object as `obj`; tests/gitops/test_argocd_health.py runs it with
-- Debian's lua5.1 over every status the operator's phase machine publishes.
--
--   Healthy      phase InSync and Ready=True, for the current generation
--   Degraded     phase Failed, or Stalled=True (Blocked, a reading that keeps failing)
--   Progressing  everything else: not read yet, a spec change not yet observed,
--                working, AwaitingApproval (a person's turn), Suspended
hs = {}
local status = obj.status
if status == nil or status.phase == nil then
  hs.status = "Progressing"
  hs.message = "waiting for the operator to read it"
  return hs
end
local generation = obj.metadata.generation
if generation ~= nil and (status.observedGeneration == nil or status.observedGeneration < generation) then
  hs.status = "Progressing"
  hs.message = "the operator has not read generation " .. generation .. " yet"
  return hs
end
local conditions = {}
if status.conditions ~= nil then
  for _, condition in ipairs(status.conditions) do
    conditions[condition.type] = condition
  end
end
local function holds(kind)
  return conditions[kind] ~= nil and conditions[kind].status == "True"
end
local function because(kind)
  local condition = conditions[kind]
  if condition ~= nil and condition.message ~= nil and condition.message ~= "" then
    return ": " .. condition.message
  end
  return ""
end
if status.phase == "Failed" or holds("Stalled") then
  hs.status = "Degraded"
  hs.message = status.phase .. because("Stalled")
  return hs
end
if status.phase == "InSync" and holds("Ready") then
  hs.status = "Healthy"
  hs.message = "InSync"
  return hs
end
hs.status = "Progressing"
if status.phase == "AwaitingApproval" then
  hs.message = "AwaitingApproval: a plan waits for a person (kubectl ptah plan, kubectl ptah approve)"
else
  hs.message = status.phase .. because("Ready")
end
return hs
